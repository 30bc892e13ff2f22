package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// noFailedOrders checks that the database refused none of the item's
// admitted orders.
func noFailedOrders(t *testing.T, s *Service, itemID int64) {
	t.Helper()
	var n int
	if err := rawSQL(t, s.store).QueryRow("SELECT COUNT(*) FROM order_failures WHERE item_id = ?", itemID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("item %d: %d admitted orders recorded as failed; want none", itemID, n)
	}
}

// A lua-async item of four buckets under a stampede in which nine buyers
// in ten have their home in one bucket: the home bucket's gate is refilled
// from the others, every buyer is admitted while units remain (no
// sold_out), every 202 is written by the writers (two of them, batching
// per bucket stream), then exactly the rest of the stock sells. Each
// bucket row's sold is the live orders of its buyers, and the rows sum to
// the stock.
func TestAsyncBucketsSkewedStampede(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{Queue: queue.Config{Writers: 2}}, nil)
		it := createBucketedAs(t, s, stock.StrategyLuaAsync, 200, 4)
		orders, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("as%d", it.ID), it.ID, 4, 180, 9))
		if len(orders) != 180 || len(refused) != 0 {
			t.Fatalf("180 buyers for 200 units: %d orders, refusals %v; want every one admitted", len(orders), refused)
		}
		late, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("al%d", it.ID), it.ID, 4, 40, 5))
		if len(late) != 20 || refused["sold_out"] != 20 || len(refused) != 1 {
			t.Errorf("40 buyers for the last 20 units: %d orders, refusals %v; want 20 and 20 sold_out", len(late), refused)
		}
		ids := make([]string, 0, 200)
		for _, m := range []map[string]string{orders, late} {
			for _, id := range m {
				ids = append(ids, id)
			}
		}
		awaitWritten(t, s, ids, 30*time.Second)
		checkSold(t, s, it.ID, int64(len(ids)))
		noFailedOrders(t, s, it.ID)
		rows := checkBucketRows(t, s, it)
		if len(rows) == 4 && rows[0].Sold <= 50 {
			t.Errorf("bucket row 0 sold %d: the hot bucket's orders were not written on its row (%+v)", rows[0].Sold, rows)
		}
		st, err := s.AsyncStats(context.Background(), it.ID)
		if err != nil || st.Queued != 0 || st.Unacked != 0 {
			t.Errorf("queue after the sale: %+v %v; want every bucket's stream empty", st, err)
		}
		if r, err := s.Reconcile(context.Background(), it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Errorf("reconcile after the sale: %+v %v; want no drift", r, err)
		}
	})
}

// Idempotency-Keys of a bucketed lua-async item live in the bucket the key
// picks, claimed before the order is queued at home. The same key sent at
// once from many goroutines, and again later, gives one order; the key
// reused by another user is refused (422); a claim left naming an order
// that was never queued (its request died between the claim and the
// enqueue) is finished by the retry, with that order id.
func TestAsyncBucketsIdempotencyKeys(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
		ctx := context.Background()
		it := createBucketedAs(t, s, stock.StrategyLuaAsync, 50, 4)
		// A user whose home is not the key's bucket.
		key := fmt.Sprintf("key-%d", it.ID)
		user := ""
		for i := 0; user == ""; i++ {
			if u := fmt.Sprintf("ik%d-%d", it.ID, i); gate.HomeBucket(it.ID, 4, u).B != gate.PickBucket(it.ID, 4, key).B {
				user = u
			}
		}
		req := stock.OrderRequest{ItemID: it.ID, UserID: user, IdempotencyKey: key}
		var mu sync.Mutex
		ids := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				o, _, err := s.PlaceOrder(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					ids["error: "+err.Error()]++
					return
				}
				ids[o.ID]++
			}()
		}
		close(start)
		wg.Wait()
		if len(ids) != 1 {
			t.Fatalf("16 concurrent requests with one key: answers %v; want one order", ids)
		}
		var first string
		for id := range ids {
			first = id
		}
		awaitWritten(t, s, []string{first}, 20*time.Second)
		o, replayed, err := s.PlaceOrder(ctx, req)
		if err != nil || o.ID != first || !replayed {
			t.Errorf("retry after the write: %+v replayed=%v %v; want order %s replayed", o, replayed, err, first)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user + "-other", IdempotencyKey: key}); !errors.Is(err, stock.ErrIdempotencyConflict) {
			t.Errorf("the key reused by another user: %v; want %v", err, stock.ErrIdempotencyConflict)
		}
		// A claim naming an order never queued.
		rdb := b.Universal(t)
		lost := uuid.Must(uuid.NewV7()).String()
		key2, user2 := key+"-2", user+"-2"
		if err := rdb.Set(ctx, s.idemKey(it, key2), user2+"|"+lost, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		o, _, err = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user2, IdempotencyKey: key2})
		if err != nil || o.ID != lost {
			t.Fatalf("retry of a claim whose order was never queued: %+v %v; want order %s", o, err, lost)
		}
		o, _, err = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user2, IdempotencyKey: key2})
		if err != nil || o.ID != lost {
			t.Errorf("its retry: %+v %v; want order %s", o, err, lost)
		}
		awaitWritten(t, s, []string{lost}, 20*time.Second)
		var n int
		if err := rawSQL(t, s.store).QueryRow("SELECT COUNT(*) FROM orders WHERE item_id = ? AND user_id IN (?, ?)", it.ID, user, user2).Scan(&n); err != nil || n != 2 {
			t.Errorf("orders of the two keyed users: %d %v; want 2", n, err)
		}
		noFailedOrders(t, s, it.ID)
	})
}

// readAs reads up to n new entries of a stream as consumer, as a writer
// does before it commits them, and returns them parsed.
func readAs(t *testing.T, rdb redis.UniversalClient, itemID int64, stream, consumer string, n int64) []*store.Queued {
	t.Helper()
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, stream, queue.Group, "0").Err(); err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
		t.Fatal(err)
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: queue.Group, Consumer: consumer, Streams: []string{stream, ">"}, Count: n, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Queued
	for _, st := range res {
		for _, m := range st.Messages {
			q, err := queue.ParseEntry(itemID, m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, q)
		}
	}
	if int64(len(out)) != n {
		t.Fatalf("read %d entries of %s, want %d", len(out), stream, n)
	}
	return out
}

// Redis loses one bucket of a lua-async item, its stream and meta, while
// a writer holds entries of it read but not committed, and another writer
// holds entries of a surviving bucket. The next order of a buyer of the
// lost bucket rebuilds the item: only the lost bucket's row gets a new
// queue epoch, so its stale batch is refused (the gate was rebuilt without
// it) while the surviving bucket's batch commits, and every other queued
// order is written.
func TestAsyncBucketsRedisLossFencesOneBucket(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := newTestServiceOn(t, b, st, Config{}, nil) // admits only
		rdb := b.Universal(t)
		const k = 4
		it := createBucketedAs(t, api, stock.StrategyLuaAsync, 100, k)
		var queued []string
		for bucket := 0; bucket < k; bucket++ {
			for _, u := range usersIn(fmt.Sprintf("rl%d", it.ID), it.ID, k, bucket, 5) {
				o, _, err := api.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: u})
				if err != nil {
					t.Fatal(err)
				}
				queued = append(queued, o.ID)
			}
		}
		keys := api.keys
		lostBk, liveBk := keys.Bucket(gate.Bucket{Item: it.ID, B: 2, K: k}), keys.Bucket(gate.Bucket{Item: it.ID, B: 0, K: k})
		stale := readAs(t, rdb, it.ID, lostBk.Stream, "gone-host-1-abc-w0", 3)
		valid := readAs(t, rdb, it.ID, liveBk.Stream, "gone-host-1-abc-w0", 3)
		if err := rdb.Del(ctx, lostBk.Stream).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, lostBk.Meta).Err(); err != nil {
			t.Fatal(err)
		}
		// A new buyer of the lost bucket: its order rebuilds the item.
		nu := usersIn(fmt.Sprintf("rn%d", it.ID), it.ID, k, 2, 1)[0]
		o, _, err := api.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: nu})
		if err != nil {
			t.Fatalf("order after the loss: %v", err)
		}
		var epochs [k]int64
		for bucket := range epochs {
			if err := rawSQL(t, st).QueryRow("SELECT queue_epoch FROM item_stock WHERE item_id = ? AND bucket = ?", it.ID, bucket).Scan(&epochs[bucket]); err != nil {
				t.Fatal(err)
			}
		}
		if epochs != [k]int64{0, 0, 1, 0} {
			t.Fatalf("bucket rows' queue epochs after the rebuild: %v; want only row 2's moved on ([0 0 1 0])", epochs)
		}
		if _, err := st.PersistQueuedBucket(ctx, it.ID, 2, stale, store.Now()); !errors.Is(err, store.ErrQueueLost) {
			t.Errorf("the lost bucket's stale batch: %v; want %v", err, store.ErrQueueLost)
		}
		if res, err := st.PersistQueuedBucket(ctx, it.ID, 0, valid, store.Now()); err != nil || len(res.Written) != len(valid) {
			t.Errorf("the surviving bucket's batch: %d written, %v; want all %d", len(res.Written), err, len(valid))
		}
		// Writers now: they take over the dead consumer's entries (found
		// written) and write the rest.
		w := newTestServiceOn(t, b, st, Config{Queue: queue.Config{Writers: 1}}, nil)
		// The lost bucket's orders (queued[10:15]) went with it; the
		// others' are written.
		awaitWritten(t, w, append(append([]string{}, queued[:10]...), append(queued[15:], o.ID)...), 30*time.Second)
		for _, q := range stale {
			if _, err := st.Order(ctx, q.ID); !errors.Is(err, stock.ErrNotFound) {
				t.Errorf("stale order %s of the lost bucket: %v; want never written", q.ID, err)
			}
		}
		noFailedOrders(t, w, it.ID)
		checkBucketRows(t, w, it)
		if r, err := w.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Errorf("reconcile after the loss: %+v %v; want no drift", r, err)
		}
	})
}
