package app_test

import (
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// TestConcurrencyProof: stock 100, concurrent attempts with repeats and
// replays, for every strategy on every backend, the Redis Cluster
// included: 2,000 from 1,000 users on MariaDB and one Redis (the
// deployment the service is built for), 1,000 from 500 users on the
// embedded default (one SQLite writer and one in-process Redis serialize
// them anyway) and on the cluster (whose own concern is the item's slot,
// not the crowd); and 1,000 attempts from 500 users for a lua item whose
// stock is split over 3 and 8 gate buckets, for a lock item split over 4
// buckets (locks, fences and rows), and for a lua-async item split over 4
// buckets (streams, queue epochs and rows). Always five buyers a unit or
// more, all released at once.
func TestConcurrencyProof(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel() // each backend has its own database and key prefix
		_, c := apptest.Start(t, b)
		db := b.DB(t)
		users := 1000
		if b.Name != "mariadb" {
			users = 500
		}
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				apptest.Proof(t, c, db, strategy, apptest.ProofSpec{Stock: 100, Users: users})
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
		t.Run("lua-async/buckets=4", func(t *testing.T) {
			apptest.Proof(t, c, db, "lua-async", apptest.ProofSpec{Stock: 100, Users: 500, Buckets: 4})
		})
	})
}
