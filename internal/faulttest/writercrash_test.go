package faulttest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// A worker killed with SIGKILL between a batch's COMMIT and its XACK: the
// database has the batch, the stream still has it pending. A fresh worker
// takes it over (the dead one's lease is gone) and finds it done, so every order is written
// exactly once and the queue drains.
func TestWriterKilledBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	const orders, batch = 300, 100
	b := testenv.Real(t)
	be := realBackends(b)
	rdb := redisClient(t, b.RedisURL)
	db := openDB(t, b.MySQLDSN)

	// The API admits and writes nothing: SECKILL_WRITERS=0.
	api, it, ids := queueWithoutWriters(t, be, orders, "crash-u")
	k := keys{prefix: b.KeyPrefix, item: it.ID}
	if st := readDB(t, db, it.ID); len(st.orders) != 0 || st.sold != 0 {
		t.Fatalf("with no writer running the database has %d orders, sold %d; want none", len(st.orders), st.sold)
	}
	if q := readQueue(t, rdb, k); q.length != orders {
		t.Fatalf("stream holds %d entries, want %d", q.length, orders)
	}

	// One writer, batches of 100: it commits the first 100, then dies.
	crasher := startWorker(t, "worker-crashing", be, map[string]string{
		"SECKILL_WRITERS": "1", "SECKILL_WRITER_BATCH": fmt.Sprint(batch), "SECKILL_TEST_CRASH_AFTER_COMMIT": "1"}, false)
	state := crasher.waitExit(30 * time.Second)
	if !killedBySIGKILL(state) {
		t.Fatalf("crashing worker ended with %v, want killed by SIGKILL", state)
	}
	st := readDB(t, db, it.ID)
	if len(st.orders) != batch || st.sold != batch {
		t.Fatalf("after the crash the database has %d orders, sold %d; want the first batch, %d", len(st.orders), st.sold, batch)
	}
	// The committed batch is exactly what the stream still has pending.
	ctx := context.Background()
	pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k.stream(), Group: "writers", Start: "-", End: "+", Count: 10 * orders}).Result()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	entries, err := rdb.XRange(ctx, k.stream(), "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE: %v", err)
	}
	orderOf := map[string]string{}
	for _, e := range entries {
		orderOf[e.ID], _ = e.Values["o"].(string)
	}
	if len(entries) != orders || len(pend) != batch {
		t.Fatalf("after the crash the stream has %d entries, %d pending; want %d and %d", len(entries), len(pend), orders, batch)
	}
	for _, p := range pend {
		if _, ok := st.orders[orderOf[p.ID]]; !ok {
			t.Errorf("pending entry %s (order %q) is not among the committed orders", p.ID, orderOf[p.ID])
		}
	}

	// A fresh worker claims the dead one's entries and writes the rest.
	w := startWorker(t, "worker", be, nil, true)
	took := waitDrained(t, rdb, k, 30*time.Second)
	t.Logf("drained %v after the fresh worker answered", took.Round(time.Millisecond))

	st = readDB(t, db, it.ID)
	for id, u := range ids {
		o, ok := st.orders[id]
		if !ok || o.user != u || o.status != "created" {
			t.Errorf("order %s of %s: got %+v (present %v), want created for %s", id, u, o, ok, u)
		}
	}
	for id := range st.orders {
		if _, ok := ids[id]; !ok {
			t.Errorf("order %s is in the database but was never answered 202", id)
		}
	}
	if st.sold != orders || len(st.orders) != orders {
		t.Errorf("items.sold = %d, rows = %d; want both %d", st.sold, len(st.orders), orders)
	}
	if len(st.failures) != 0 {
		t.Errorf("order_failures has %d rows, want none: %v", len(st.failures), st.failures)
	}
	checkQueueEmpty(t, rdb, k)
	if n := awaitNoMarkers(t, rdb, b.KeyPrefix, 5*time.Second); n != 0 {
		t.Errorf("%d pending-order markers left, want none", n)
	}
	for id := range ids {
		r := api.c.Must(t, "GET", "/api/v1/orders/"+id, nil, false, nil)
		var o struct{ Status string }
		r.JSON(t, &o)
		if r.Status != http.StatusOK || o.Status != "created" {
			t.Errorf("GET order %s: got %d %s, want 200 created", id, r.Status, r.Body)
			break
		}
	}

	// The redelivered batch was found done, not written again.
	m := "http://" + w.admin + "/metrics"
	written := metric(t, m, `seckill_async_orders_persisted_total{outcome="written"}`)
	already := metric(t, m, `seckill_async_orders_persisted_total{outcome="already"}`)
	failed := metric(t, m, `seckill_async_orders_persisted_total{outcome="failed"}`)
	dead := metric(t, m, `seckill_async_dead_letters_total`)
	t.Logf("fresh worker: written %v, already %v, failed %v, dead-lettered %v", written, already, failed, dead)
	if written != orders-batch || already < batch || failed != 0 || dead != 0 {
		t.Errorf("fresh worker persisted written %v, already %v, failed %v, dead-lettered %v; want %d, at least %d, 0, 0",
			written, already, failed, dead, orders-batch, batch)
	}
}

// queueWithoutWriters starts a service that admits and writes nothing
// (SECKILL_WRITERS=0), creates a lua-async item of stock 1000 and has n
// users (prefix0, prefix1, …) order it; every order must be acknowledged
// with its own id.
func queueWithoutWriters(t *testing.T, be backends, n int, prefix string) (*service, apptest.Item, map[string]string) {
	t.Helper()
	api := startService(t, "api", "", be, map[string]string{"SECKILL_WRITERS": "0"})
	it := api.c.CreateItem(t, 1000, "lua-async")
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	ids := placeAll(t, api.c, it.ID, users, 16)
	if len(ids) != n {
		t.Fatalf("got %d acknowledged orders with distinct ids, want %d", len(ids), n)
	}
	return api, it, ids
}
