package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A connection cut during a batch's COMMIT on Galera leaves its outcome
// unknown to the client: ErrMaybeCommitted, never a plain refusal, and the
// truth is found by reading the orders back (what the shop does with
// Store.Order) on any node, through HAProxy again or directly. Both
// outcomes are played through a fault proxy in front of HAProxy:
//   - committed: the COMMIT reaches the writer and its answer is held,
//     the cluster commits the batch (seen on another node), then the cut;
//   - not written: the cut comes once the units were taken and before the
//     COMMIT could reach the server, which rolls the transaction back.
func TestGaleraCommitCutIsResolvedByReadingBack(t *testing.T) {
	g := testenv.Galera(t)
	ctx := context.Background()
	front, err := gomysql.ParseDSN(g.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, front.Addr)
	viaProxy := *front
	viaProxy.Addr = proxy.Addr()
	st, _, writer := galeraStore(t, viaProxy.FormatDSN())
	back, _, _ := galeraStore(t, g.DSN) // the read-back, not through the cut
	nodes, other := galeraNodes(t, g, writer, "1")

	it := &stock.Item{Name: "galera cut", Stock: 10, Strategy: stock.StrategyLua}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		t.Fatal(err)
	}
	ordersOn := func(n *sql.DB) (orders, sold int64) {
		t.Helper()
		if err := n.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM orders WHERE item_id = ?), sold FROM items WHERE id = ?", it.ID, it.ID).Scan(&orders, &sold); err != nil {
			t.Fatal(err)
		}
		return orders, sold
	}
	readBack := func(batch []OrderWrite) (found int) {
		t.Helper()
		for _, w := range batch {
			_, err := back.Order(ctx, w.Order.ID)
			switch {
			case err == nil:
				found++
			case !errors.Is(err, stock.ErrNotFound):
				t.Fatalf("read back order %s: %v", w.Order.ID, err)
			}
		}
		return found
	}

	t.Run("committed", func(t *testing.T) {
		batch := galeraBatch(it.ID, "kept", 3)
		cut := make(chan error, 1)
		st.takenHook = func(context.Context, *sql.Tx) {
			proxy.Latency(time.Hour) // the COMMIT goes on, its answer is held
			go func() {
				// Wait on the event: the cluster committed the batch. Each
				// read on the other node first catches up with the cluster.
				var seen int64
				var err error
				for seen < 3 && err == nil {
					err = other.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE item_id = ?", it.ID).Scan(&seen)
				}
				proxy.Cut()
				cut <- err
			}()
		}
		err := st.InsertBatch(ctx, batch, Now(), 0, nil)
		st.takenHook = nil
		if err := <-cut; err != nil {
			t.Fatalf("watching the batch commit on another node: %v", err)
		}
		proxy.Latency(0)
		proxy.Restore()
		if !errors.Is(err, ErrMaybeCommitted) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("COMMIT whose answer was cut: got %v, want ErrMaybeCommitted (a 503 read back later)", err)
		}
		if found := readBack(batch); found != 3 {
			t.Fatalf("read back: %d of the 3 orders the cluster committed", found)
		}
		for i, n := range nodes {
			if orders, sold := ordersOn(n); orders != 3 || sold != 3 {
				t.Errorf("node %d: %d orders, sold %d; want the committed batch's 3 and 3", i+1, orders, sold)
			}
		}
	})

	t.Run("not written", func(t *testing.T) {
		batch := galeraBatch(it.ID, "lost", 2)
		st.takenHook = func(context.Context, *sql.Tx) { proxy.Cut() }
		err := st.InsertBatch(ctx, batch, Now(), 0, nil)
		st.takenHook = nil
		proxy.Restore()
		if !errors.Is(err, ErrMaybeCommitted) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("COMMIT on a cut connection: got %v, want ErrMaybeCommitted (the client cannot know)", err)
		}
		if found := readBack(batch); found != 0 {
			t.Fatalf("read back: %d of the 2 orders whose COMMIT never reached the server", found)
		}
		for i, n := range nodes {
			if orders, sold := ordersOn(n); orders != 3 || sold != 3 {
				t.Errorf("node %d: %d orders, sold %d; want the first batch's 3 and 3 only", i+1, orders, sold)
			}
		}
		// The store writes again through the restored path.
		if err := st.InsertBatch(ctx, galeraBatch(it.ID, "after", 1), Now(), 0, nil); err != nil {
			t.Fatalf("a batch after the cut: %v", err)
		}
	})
}
