package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A queued order is found by id alone through its index, which is only a
// pointer: the marker in the item's slot says whether it is queued. Once
// written, both are gone and the database answers.
func TestQueuedOrderFoundByID(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		rdb := b.Redis(t)
		it := createAsyncItem(t, api, 5)
		ids := queueOrders(t, api, it.ID, 3, "m")

		for i, id := range ids {
			o, err := api.Order(ctx, id)
			if err != nil || o.Status != stock.StatusPending || o.ItemID != it.ID || o.UserID != fmt.Sprintf("m%d", i) {
				t.Fatalf("queued order %s: got %+v %v, want pending, item %d, user m%d", id, o, err, it.ID, i)
			}
		}
		// Every key the enqueue script wrote is in the item's slot; the
		// index, written after, is the only one outside it.
		if n, err := rdb.Exists(ctx, api.keys.Queued(it.ID, ids[0]), api.keys.OrderIndex(ids[0])).Result(); err != nil || n != 2 {
			t.Fatalf("marker and index of %s: got %d %v, want both", ids[0], n, err)
		}

		// An index whose marker is gone (written since, or never
		// admitted) means nothing.
		if err := rdb.Del(ctx, api.keys.Queued(it.ID, ids[1])).Err(); err != nil {
			t.Fatal(err)
		}
		if o, err := api.Order(ctx, ids[1]); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("index without marker: got %+v %v, want not found", o, err)
		}
		stray := "0190f7d2-0000-7000-8000-000000000001"
		if err := rdb.Set(ctx, api.keys.OrderIndex(stray), it.ID, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if o, err := api.Order(ctx, stray); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("stray index: got %+v %v, want not found", o, err)
		}
		// A marker written by an earlier version ("item|user|ms" under the
		// index's name) is still read.
		old := "0190f7d2-0000-7000-8000-000000000002"
		if err := rdb.Set(ctx, api.keys.OrderIndex(old), fmt.Sprintf("%d|olduser|%d", it.ID, time.Now().UnixMilli()), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if o, err := api.Order(ctx, old); err != nil || o.UserID != "olduser" || o.ItemID != it.ID || o.Status != stock.StatusPending {
			t.Errorf("earlier marker: got %+v %v, want pending order of olduser", o, err)
		}
		if err := rdb.Del(ctx, api.keys.OrderIndex(old), api.keys.OrderIndex(stray)).Err(); err != nil {
			t.Fatal(err)
		}

		// A keyed retry knows the item: it reads the marker without the
		// index, and writes the index (its first request may have been
		// abandoned before it could).
		req := stock.OrderRequest{ItemID: it.ID, UserID: "keyed", IdempotencyKey: "keyed-1"}
		first, _, err := api.PlaceOrder(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, api.keys.OrderIndex(first.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		if o, err := api.Order(ctx, first.ID); !errors.Is(err, stock.ErrNotFound) {
			t.Fatalf("order without index: got %+v %v, want not found", o, err)
		}
		again, replayed, err := api.PlaceOrder(ctx, req)
		if err != nil || !replayed || again.ID != first.ID || again.Status != stock.StatusPending {
			t.Fatalf("keyed retry: got %+v replayed %v %v, want %s pending replayed", again, replayed, err, first.ID)
		}
		if o, err := api.Order(ctx, first.ID); err != nil || o.Status != stock.StatusPending {
			t.Errorf("after the retry: got %+v %v, want the order found by id, pending", o, err)
		}
		ids = append(ids, first.ID)

		// Writers write them all (the one whose marker was dropped too:
		// the marker is for reading, not for writing) and drop what marked
		// them.
		asyncService(t, b, st, 1, time.Second, 0)
		awaitWritten(t, api, ids, 15*time.Second)
		deadline := time.Now().Add(5 * time.Second)
		for _, id := range ids {
			for {
				n, err := rdb.Exists(ctx, api.keys.Queued(it.ID, id), api.keys.OrderIndex(id)).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("order %s written, but %d of its marker and index are left", id, n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
}
