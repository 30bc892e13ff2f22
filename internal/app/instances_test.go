package app_test

import (
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// sharedBackends are the backends the several-instance tests run on: every
// instance of a test gets the same one (one database, one key prefix), on
// a single Redis and on a Redis Cluster.
var sharedBackends = []struct {
	name string
	open func(testing.TB) testenv.Backend
}{
	{"mariadb", testenv.Real},
	{"cluster", testenv.Cluster},
}

// forEachShared runs fn as a subtest on each shared backend.
func forEachShared(t *testing.T, fn func(t *testing.T, b testenv.Backend)) {
	t.Helper()
	for _, sb := range sharedBackends {
		t.Run(sb.name, func(t *testing.T) {
			t.Parallel() // each backend has its own database and key prefix
			fn(t, sb.open(t))
		})
	}
}

// startInstances starts n instances of the service on one backend.
func startInstances(t *testing.T, b testenv.Backend, n int) []*apptest.Client {
	t.Helper()
	cs := make([]*apptest.Client, n)
	for i := range cs {
		_, cs[i] = apptest.Start(t, b)
	}
	return cs
}

// TestConcurrencyProofThreeInstances: the concurrency proof with its
// attempts spread round-robin over three instances on one database and one
// Redis (a user's two attempts, and every replayed key, reach two different
// instances), for every strategy: 1,000 attempts from 500 users, five
// buyers a unit (the single-instance proof on MariaDB sends twice as many);
// on the cluster also a lua-async item of four buckets.
func TestConcurrencyProofThreeInstances(t *testing.T) {
	t.Parallel()
	forEachShared(t, func(t *testing.T, b testenv.Backend) {
		cs := startInstances(t, b, 3)
		db := b.DB(t)
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				apptest.ProofAcross(t, cs, db, strategy, apptest.ProofSpec{Stock: 100, Users: 500})
			})
		}
		if b.IsCluster() {
			// A bucketed lua-async item across the instances: its four
			// buckets' gates, streams and rows on the cluster's masters,
			// each instance's writers taking a share of the streams.
			t.Run("lua-async/buckets=4", func(t *testing.T) {
				apptest.ProofAcross(t, cs, db, "lua-async", apptest.ProofSpec{Stock: 50, Users: 250, Buckets: 4})
			})
		}
	})
}
