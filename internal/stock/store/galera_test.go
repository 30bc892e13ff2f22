package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// galeraStore opens a Store on a fresh database of the Galera cluster,
// through dsn (HAProxy's, or a proxy in front of it), and names the node
// taking its writes.
func galeraStore(t *testing.T, dsn string) (*Store, *sql.DB, string) {
	t.Helper()
	ctx := context.Background()
	db, _, _, err := database.Open(ctx, dsn, "")
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
	return st, sqlDB, writer
}

// galeraNodes opens each node of g directly, every session waiting for
// causality at the wsrep_sync_wait level given (1: reads; 3: reads,
// UPDATEs and DELETEs), and returns them with the first one that is not
// writer.
func galeraNodes(t *testing.T, g testenv.GaleraBackend, writer, syncWait string) ([]*sql.DB, *sql.DB) {
	t.Helper()
	nodes := make([]*sql.DB, len(g.NodeDSNs))
	var other *sql.DB
	for i, dsn := range g.NodeDSNs {
		c, err := gomysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// A DSN parameter: the driver sets it on every connection it
		// opens, a new one after a dropped connection too.
		c.Params = map[string]string{"wsrep_sync_wait": syncWait}
		n, err := sql.Open("mysql", c.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
		var name, wait string
		if err := n.QueryRow("SELECT @@wsrep_node_name, @@SESSION.wsrep_sync_wait").Scan(&name, &wait); err != nil {
			t.Fatal(err)
		}
		if wait != syncWait {
			t.Fatalf("node %d: wsrep_sync_wait %s, want %s", i+1, wait, syncWait)
		}
		if name != writer && other == nil {
			other = n
		}
	}
	if other == nil {
		t.Fatalf("no node besides the writer %s among %v", writer, g.NodeDSNs)
	}
	return nodes, other
}

// galeraBatch is n orders of item, their users prefix0..prefix(n-1).
func galeraBatch(item int64, prefix string, n int) []OrderWrite {
	var out []OrderWrite
	for i := range n {
		u := fmt.Sprintf("%s%d", prefix, i)
		out = append(out, OrderWrite{Order: &stock.Order{ID: fmt.Sprintf("%036s", u), ItemID: item, UserID: u}})
	}
	return out
}

// On Galera a transaction can fail at COMMIT with 1213: its certification
// lost to a write set another node committed first on the same row. The
// server rolled it back whole, so the batch is not written: the store
// must say ErrUnavailable (a 503 whose units are handed back), never
// ErrMaybeCommitted (which keeps the reservation until a read-back). The
// conflict is real and placed by the event, not by a count of statements:
// once the batch's UPDATE took the units on the writer (through HAProxy),
// before its COMMIT, another node updates the item's row, after it caught
// up with the cluster (wsrep_sync_wait covers UPDATE there), so the row is
// there to update and exactly one row changes.
func TestGaleraCertificationFailureAtCommitIsNotWritten(t *testing.T) {
	g := testenv.Galera(t)
	ctx := context.Background()
	st, _, writer := galeraStore(t, g.DSN)
	nodes, other := galeraNodes(t, g, writer, "3")

	it := &stock.Item{Name: "galera", Stock: 10, Strategy: stock.StrategyLua}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		t.Fatal(err)
	}
	hooked := 0
	var conflict error
	var changed int64
	st.takenHook = func(context.Context, *sql.Tx) {
		hooked++
		var res sql.Result
		if res, conflict = other.ExecContext(ctx, "UPDATE items SET name = 'changed elsewhere' WHERE id = ?", it.ID); conflict == nil {
			changed, conflict = res.RowsAffected()
		}
	}
	err := st.InsertBatch(ctx, galeraBatch(it.ID, "cert", 3), Now(), 0, nil)
	st.takenHook = nil
	if hooked != 1 {
		t.Fatalf("the hook after the units were taken ran %d times, want 1", hooked)
	}
	if conflict != nil {
		t.Fatalf("the conflicting update on another node: %v", conflict)
	}
	if changed != 1 {
		t.Fatalf("the conflicting update on another node changed %d rows, want 1 (the item's)", changed)
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
	if err := st.InsertBatch(ctx, galeraBatch(it.ID, "ok", 2), Now(), 0, nil); err != nil {
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
