package app_test

import (
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// TestConcurrencyProof: stock 100, 2,000 concurrent attempts from 1,000
// users with repeats and replays, for every strategy on every backend, the
// Redis Cluster included.
func TestConcurrencyProof(t *testing.T) {
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		db := b.DB(t)
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				apptest.Proof(t, c, db, strategy, apptest.ProofSpec{Stock: 100, Users: 1000})
			})
		}
	})
}
