package faulttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// TestBucketedWriterKilledBetweenCommitAndAck is the same crash for a
// lua-async item over four buckets: a stream and a bucket row each, and a
// writer that commits the batches of several buckets at once. The worker
// dies (SIGKILL) right after its first batch commits, whatever other
// buckets' batches are doing; every committed order is then still pending
// in its bucket's stream or was acknowledged, and a fresh worker takes the
// dead one's entries over: every 202 is written exactly once, row b sold
// exactly the orders of the buyers whose home is b, and every stream
// drains.
func TestBucketedWriterKilledBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	const orders, batch, k = 300, 40, 4
	b := testenv.Real(t)
	be := realBackends(b)
	rdb := redisClient(t, b.RedisURL)
	db := openDB(t, b.MySQLDSN)
	gk, err := gate.NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}

	api := startService(t, "api", "", be, map[string]string{"SECKILL_WRITERS": "0"})
	it := api.c.CreateBucketedItem(t, 1000, "lua-async", k)
	users := make([]string, orders)
	for i := range users {
		users[i] = fmt.Sprintf("bcrash-u%d", i)
	}
	ids := placeAll(t, api.c, it.ID, users, 16)
	if len(ids) != orders {
		t.Fatalf("got %d acknowledged orders with distinct ids, want %d", len(ids), orders)
	}
	streams := make([]string, k)
	for i, bk := range gate.AllBuckets(it.ID, k) {
		streams[i] = gk.Bucket(bk).Stream
	}
	ctx := context.Background()
	queued := func() (entries, pending int64, orderOf map[string]string, pendingOrders map[string]bool) {
		t.Helper()
		orderOf, pendingOrders = map[string]string{}, map[string]bool{}
		for _, s := range streams {
			es, err := rdb.XRange(ctx, s, "-", "+").Result()
			if err != nil {
				t.Fatalf("XRANGE %s: %v", s, err)
			}
			entries += int64(len(es))
			for _, e := range es {
				orderOf[s+"/"+e.ID], _ = e.Values["o"].(string)
			}
			ps, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s, Group: "writers", Start: "-", End: "+", Count: 10 * orders}).Result()
			if err != nil && !strings.HasPrefix(err.Error(), "NOGROUP") {
				t.Fatalf("XPENDING %s: %v", s, err)
			}
			pending += int64(len(ps))
			for _, p := range ps {
				pendingOrders[orderOf[s+"/"+p.ID]] = true
			}
		}
		return entries, pending, orderOf, pendingOrders
	}
	if n, _, _, _ := queued(); n != orders {
		t.Fatalf("the %d streams hold %d entries, want %d", k, n, orders)
	}
	homes := map[int]int{}
	for _, u := range users {
		homes[gate.HomeBucket(it.ID, k, u).B]++
	}
	if len(homes) < 2 {
		t.Fatalf("the buyers' homes %v: want orders in several buckets", homes)
	}

	crasher := startWorker(t, "worker-crashing", be, map[string]string{
		"SECKILL_WRITERS": "1", "SECKILL_WRITER_BATCH": fmt.Sprint(batch), "SECKILL_TEST_CRASH_AFTER_COMMIT": "1"}, false)
	state := crasher.waitExit(30 * time.Second)
	if !killedBySIGKILL(state) {
		t.Fatalf("crashing worker ended with %v, want killed by SIGKILL", state)
	}
	st := readDB(t, db, it.ID)
	if len(st.orders) < batch || len(st.orders) > k*batch {
		t.Fatalf("after the crash the database has %d orders; want the first batch at least (%d), at most one a bucket (%d)", len(st.orders), batch, k*batch)
	}
	entries, pending, _, pendingOrders := queued()
	if int(entries)+len(st.orders) < orders {
		t.Errorf("after the crash: %d orders written and %d entries left, fewer than the %d acknowledged", len(st.orders), entries, orders)
	}
	stillPending := 0
	for id := range st.orders {
		if pendingOrders[id] {
			stillPending++
		}
	}
	if stillPending < batch {
		t.Errorf("after the crash %d committed orders are still pending (of %d pending entries), want the crashed batch's %d at least", stillPending, pending, batch)
	}
	committed := len(st.orders)
	t.Logf("after the crash: %d orders committed (%d still pending), %d entries queued, %d pending", len(st.orders), stillPending, entries, pending)

	// The fresh worker's claim idle time is a minute: only the takeover of
	// the dead writer's lease (every bucket's stream) can drain the
	// streams within the 30 s this waits, not the idle-entry backstop.
	w := startWorker(t, "worker", be, map[string]string{"SECKILL_CLAIM_IDLE": "60s"}, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, p, _, _ := queued(); n == 0 && p == 0 {
			break
		}
		if time.Now().After(deadline) {
			n, p, _, _ := queued()
			t.Fatalf("the streams hold %d entries, %d pending, 30 s after the fresh worker answered: the dead writer's entries were not taken over", n, p)
		}
		time.Sleep(50 * time.Millisecond)
	}

	st = readDB(t, db, it.ID)
	for id, u := range ids {
		if o, ok := st.orders[id]; !ok || o.user != u || o.status != "created" {
			t.Errorf("order %s of %s: got %+v (present %v), want created for %s", id, u, o, ok, u)
		}
	}
	for id := range st.orders {
		if _, ok := ids[id]; !ok {
			t.Errorf("order %s is in the database but was never answered 202", id)
		}
	}
	if len(st.orders) != orders || len(st.failures) != 0 {
		t.Errorf("%d order rows and %d failures, want %d and none", len(st.orders), len(st.failures), orders)
	}
	rows, err := db.QueryContext(ctx, "SELECT bucket, sold FROM item_stock WHERE item_id = ?", it.ID)
	if err != nil {
		t.Fatalf("read bucket rows: %v", err)
	}
	defer rows.Close()
	sold := map[int]int{}
	for rows.Next() {
		var bucket, n int
		if err := rows.Scan(&bucket, &n); err != nil {
			t.Fatal(err)
		}
		sold[bucket] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for bk := 0; bk < k; bk++ {
		if sold[bk] != homes[bk] {
			t.Errorf("bucket row %d sold %d, want the %d orders of its home buyers (rows %v, homes %v)", bk, sold[bk], homes[bk], sold, homes)
		}
	}
	m := "http://" + w.admin + "/metrics"
	written := metric(t, m, `seckill_async_orders_persisted_total{outcome="written"}`)
	already := metric(t, m, `seckill_async_orders_persisted_total{outcome="already"}`)
	t.Logf("fresh worker: written %v, already %v", written, already)
	if int(written) != orders-committed {
		t.Errorf("fresh worker wrote %v orders, want the %d the crashed one had not committed", written, orders-committed)
	}
	if int(already) < stillPending {
		t.Errorf("fresh worker found %v orders already written, want the %d committed ones left pending at least", already, stillPending)
	}
}
