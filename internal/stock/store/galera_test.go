package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// On Galera a transaction can fail at COMMIT with 1213: its certification
// lost to a write set another node committed first on the same row. The
// server rolled it back whole, so the batch is not written: the store
// must say ErrUnavailable (a 503 whose units are handed back), never
// ErrMaybeCommitted (which keeps the reservation until a read-back). The
// conflict is real: while the batch's transaction is open on the writer
// (through HAProxy), another node updates the item's row.
func TestGaleraCertificationFailureAtCommitIsNotWritten(t *testing.T) {
	g := testenv.Galera(t)
	ctx := context.Background()
	db, _, _, err := database.Open(ctx, g.DSN, "")
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { _ = sqlDB.Close() })
	st, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writer string
	if err := sqlDB.QueryRowContext(ctx, "SELECT @@wsrep_node_name").Scan(&writer); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*sql.DB, len(g.NodeDSNs))
	var other *sql.DB
	for i, dsn := range g.NodeDSNs {
		n, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		n.SetMaxOpenConns(1) // one session: the SET below holds for every query
		if _, err := n.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
		var name string
		if err := n.QueryRowContext(ctx, "SELECT @@wsrep_node_name").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if name != writer && other == nil {
			other = n
		}
	}
	if other == nil {
		t.Fatalf("no node besides the writer %s among %v", writer, g.NodeDSNs)
	}

	it := &stock.Item{Name: "galera", Stock: 10, Strategy: stock.StrategyLua}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, n int) []OrderWrite {
		var out []OrderWrite
		for i := range n {
			u := fmt.Sprintf("%s%d", prefix, i)
			out = append(out, OrderWrite{Order: &stock.Order{ID: fmt.Sprintf("%036s", u), ItemID: it.ID, UserID: u}})
		}
		return out
	}

	calls := 0
	var conflict error
	err = st.InsertBatch(ctx, batch("cert", 3), Now(), 0, func() {
		calls++
		if calls == 3 { // after the units were taken, before COMMIT
			_, conflict = other.ExecContext(ctx, "UPDATE items SET name = 'changed elsewhere' WHERE id = ?", it.ID)
		}
	})
	if conflict != nil {
		t.Fatalf("the conflicting update on another node: %v", conflict)
	}
	if calls < 3 {
		t.Fatalf("progress was called %d times, the conflict never ran", calls)
	}
	if err == nil {
		t.Fatal("the batch committed although another node wrote its item's row first")
	}
	if errors.Is(err, ErrMaybeCommitted) || !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("certification failure at COMMIT: got %v, want ErrUnavailable and not ErrMaybeCommitted", err)
	}
	if !isDeadlock(err) {
		t.Fatalf("the failure was not the 1213 this test is about: %v", err)
	}

	// A batch with no conflict is written, and every node holds it.
	if err := st.InsertBatch(ctx, batch("ok", 2), Now(), 0, nil); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		var orders, sold int64
		var name string
		if err := n.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM orders WHERE item_id = ?), sold, name FROM items WHERE id = ?", it.ID, it.ID).Scan(&orders, &sold, &name); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		if orders != 2 || sold != 2 || name != "changed elsewhere" {
			t.Errorf("node %d: %d orders, sold %d, name %q; want 2, 2 and the other node's name (the refused batch wrote nothing)", i+1, orders, sold, name)
		}
	}
}
