package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// On Galera GET_LOCK is node-local (node 2 grants what node 1 holds), so
// the migration lock Up takes there is a lease row every node sees: held
// through node 1, node 2 cannot take it; released, node 2 can.
func TestGaleraMigrationLockHoldsAcrossNodes(t *testing.T) {
	g := testenv.Galera(t)
	ctx := context.Background()
	n1, n2 := openNode(t, g.NodeDSNs[0]), openNode(t, g.NodeDSNs[1])
	unlock, err := migrations.Lock(ctx, n1, 0)
	if err != nil {
		t.Fatalf("node 1 takes the free lock: %v", err)
	}
	if u, err := migrations.Lock(ctx, n2, 0); err == nil {
		_ = u()
		t.Fatal("node 2 took the migration lock node 1 holds")
	}
	if err := unlock(); err != nil {
		t.Fatalf("node 1 releases: %v", err)
	}
	unlock, err = migrations.Lock(ctx, n2, 0)
	if err != nil {
		t.Fatalf("node 2 takes the lock node 1 released: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("node 2 releases: %v", err)
	}
	// The session's causality setting is its own again.
	var wait int
	if err := n2.QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait").Scan(&wait); err != nil || wait != 1 {
		t.Errorf("node 2's session after the lock: wsrep_sync_wait %d %v, want its own 1", wait, err)
	}
}

// Processes pointed at different nodes migrate one new database at once:
// they take turns, so every one succeeds and exactly one applies the
// migrations (without the lease, two would run the same DDL).
func TestGaleraConcurrentUpOnTwoNodes(t *testing.T) {
	upAtOnce(t, testenv.Galera(t).NodeDSNs)
}

// openNode opens one node's DSN, its sessions with wsrep_sync_wait=1 (as
// testenv.Galera's NodeDSNs say).
func openNode(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
