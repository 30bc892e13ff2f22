package app_test

import (
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// TestConcurrencyProof: stock 100, 2,000 concurrent attempts from 1,000
// users with repeats and replays, for every strategy on every backend, the
// Redis Cluster included; and 1,000 attempts from 500 users for a lua item
// whose stock is split over 3 and 8 gate buckets, and for a lock item
// split over 4 buckets (locks, fences and rows): still five buyers a unit.
func TestConcurrencyProof(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel() // each backend has its own database and key prefix
		_, c := apptest.Start(t, b)
		db := b.DB(t)
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				apptest.Proof(t, c, db, strategy, apptest.ProofSpec{Stock: 100, Users: 1000})
			})
		}
		// One hot item over several gate buckets and bucket rows (lua), and
		// over several locks, fences and bucket rows (lock).
		for _, k := range []int{3, 8} {
			t.Run(fmt.Sprintf("lua/buckets=%d", k), func(t *testing.T) {
				apptest.Proof(t, c, db, "lua", apptest.ProofSpec{Stock: 100, Users: 500, Buckets: k})
			})
		}
		t.Run("lock/buckets=4", func(t *testing.T) {
			apptest.Proof(t, c, db, "lock", apptest.ProofSpec{Stock: 100, Users: 500, Buckets: 4})
		})
	})
}
