package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// eventTypes is the types of an order's events, in order.
func eventTypes(t *testing.T, st *Store, orderID string) []string {
	t.Helper()
	evs, err := st.OrderEvents(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+"/"+e.Status)
	}
	return out
}

func wantTypes(t *testing.T, st *Store, orderID string, want ...string) {
	t.Helper()
	got := eventTypes(t, st, orderID)
	if len(got) != len(want) {
		t.Fatalf("order %s: events %v, want %v", orderID, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("order %s: events %v, want %v", orderID, got, want)
		}
	}
}

func newWrite(itemID int64, user string, buckets int) OrderWrite {
	return OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: itemID, UserID: user}, Buckets: buckets}
}

// Every way an order is written writes exactly one created event in its
// transaction; a refused batch writes none; pay, cancel and expiry write
// theirs.
func TestEveryOrderChangeWritesItsEvent(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, &Options{PaymentTimeout: time.Hour})
		for _, k := range []int{1, 3} {
			it := &stock.Item{Name: "events", Stock: 5, Strategy: stock.StrategyLock, Buckets: k}
			if err := st.CreateItem(ctx, it, nil); err != nil {
				t.Fatal(err)
			}
			one := newWrite(it.ID, "u1", k)
			if err := st.InsertOrder(ctx, one, 0); err != nil {
				t.Fatal(err)
			}
			wantTypes(t, st, one.Order.ID, "created/created")
			batch := []OrderWrite{newWrite(it.ID, "u2", k)}
			if k > 1 { // a batch is of one home bucket
				for u := 3; len(batch) < 2; u++ {
					w := newWrite(it.ID, "u"+string(rune('0'+u)), k)
					if stock.HomeBucketOf(w.Order.UserID, k) == stock.HomeBucketOf(batch[0].Order.UserID, k) {
						batch = append(batch, w)
					}
				}
			} else {
				batch = append(batch, newWrite(it.ID, "u3", k))
			}
			if err := st.InsertBatch(ctx, batch, Now(), 0, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range batch {
				wantTypes(t, st, w.Order.ID, "created/created")
			}
			// A batch refused (a buyer who already holds an order) writes
			// no event.
			dup := newWrite(it.ID, "u1", k)
			if k > 1 {
				dup = newWrite(it.ID, one.Order.UserID, k)
			}
			if err := st.InsertBatch(ctx, []OrderWrite{dup}, Now(), 0, nil); err == nil {
				t.Fatal("a batch of a buyer holding an order was written")
			}
			wantTypes(t, st, dup.Order.ID)

			now := Now()
			if won, err := st.PayOrder(ctx, one.Order.ID, now); err != nil || !won {
				t.Fatalf("pay: %v %v", won, err)
			}
			wantTypes(t, st, one.Order.ID, "created/created", "paid/paid")
			if won, _ := st.PayOrder(ctx, one.Order.ID, now); won {
				t.Fatal("paid twice")
			}
			wantTypes(t, st, one.Order.ID, "created/created", "paid/paid")
			if won, err := st.CancelOrder(ctx, batch[0].Order, now, false, true); err != nil || !won {
				t.Fatalf("cancel: %v %v", won, err)
			}
			wantTypes(t, st, batch[0].Order.ID, "created/created", "cancelled/cancelled")
			if won, err := st.CancelOrder(ctx, batch[1].Order, now.Add(2*time.Hour), true, true); err != nil || !won {
				t.Fatalf("expire: %v %v", won, err)
			}
			wantTypes(t, st, batch[1].Order.ID, "created/created", "expired/cancelled")
		}
	})
}

// A lua-async batch writes its created and failed events in its
// transaction; a batch from a lost queue writes none.
func TestQueuedBatchWritesItsEvents(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "queued events", Stock: 2, Strategy: stock.StrategyLuaAsync}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		batch := []*Queued{newQueued(it.ID, "a", ""), newQueued(it.ID, "b", ""), newQueued(it.ID, "c", "")}
		res, err := st.PersistQueued(ctx, it.ID, batch, Now())
		if err != nil || len(res.Written) != 2 || len(res.Failed) != 1 {
			t.Fatalf("persist: %+v %v", res, err)
		}
		wantTypes(t, st, batch[0].ID, "created/created")
		wantTypes(t, st, batch[1].ID, "created/created")
		wantTypes(t, st, batch[2].ID, "failed/failed")
		// A redelivery writes nothing again.
		if _, err := st.PersistQueued(ctx, it.ID, batch, Now()); err != nil {
			t.Fatal(err)
		}
		wantTypes(t, st, batch[0].ID, "created/created")
		wantTypes(t, st, batch[2].ID, "failed/failed")

		lost := &stock.Item{Name: "lost queue", Stock: 5, Strategy: stock.StrategyLuaAsync}
		if err := st.CreateItem(ctx, lost, nil); err != nil {
			t.Fatal(err)
		}
		q := newQueued(lost.ID, "x", "")
		q.Epoch = 7 // not the item's
		if _, err := st.PersistQueued(ctx, lost.ID, []*Queued{q}, Now()); !errors.Is(err, ErrQueueLost) {
			t.Fatalf("lost queue: %v", err)
		}
		wantTypes(t, st, q.ID)
	})
}

// The relay's marks give delivery sequence numbers that the feed pages by,
// and only the lease holder can mark (MariaDB: one lease per database).
func TestMarkPublishedAndFeedPaging(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "feed", Stock: 10, Strategy: stock.StrategyLock}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range []string{"a", "b", "c", "d", "e"} {
			w := newWrite(it.ID, u, 1)
			if err := st.InsertOrder(ctx, w, 0); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, w.Order.ID)
		}
		if n, oldest, err := st.OutboxBacklog(ctx); err != nil || n != 5 || oldest.IsZero() {
			t.Fatalf("backlog %d %v %v, want 5", n, oldest, err)
		}
		lease, err := st.AcquireOutboxLease(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Close()
		if b.MySQLDSN != "" {
			if _, err := st.AcquireOutboxLease(ctx); !errors.Is(err, ErrLeaseHeld) {
				t.Fatalf("second lease: %v, want ErrLeaseHeld", err)
			}
		}
		evs, err := st.UnpublishedEvents(ctx, 3)
		if err != nil || len(evs) != 3 || evs[0].OrderID != ids[0] || evs[2].OrderID != ids[2] {
			t.Fatalf("unpublished: %+v %v", evs, err)
		}
		if err := lease.MarkPublished(ctx, evs, Now()); err != nil {
			t.Fatal(err)
		}
		if err := lease.MarkPublished(ctx, evs[:1], Now()); !errors.Is(err, ErrMarkedElsewhere) {
			t.Fatalf("marking again: %v", err)
		}
		rest, _ := st.UnpublishedEvents(ctx, 10)
		if len(rest) != 2 || rest[0].OrderID != ids[3] {
			t.Fatalf("left unpublished: %+v", rest)
		}
		if err := lease.MarkPublished(ctx, rest, Now()); err != nil {
			t.Fatal(err)
		}
		var got []string
		var after int64
		for {
			page, err := st.EventsAfter(ctx, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				got = append(got, e.OrderID)
				if e.PubSeq != after+1 {
					t.Fatalf("delivery sequence %d after %d", e.PubSeq, after)
				}
				after = e.PubSeq
			}
		}
		if len(got) != 5 {
			t.Fatalf("feed paged %d events, want 5", len(got))
		}
		for i := range ids {
			if got[i] != ids[i] {
				t.Fatalf("feed order %v, want %v", got, ids)
			}
		}
		if n, _, _ := st.OutboxBacklog(ctx); n != 0 {
			t.Fatalf("backlog %d after marking all", n)
		}
		if err := lease.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := st.AcquireOutboxLease(ctx)
		if err != nil {
			t.Fatalf("lease after release: %v", err)
		}
		l2.Close()
	})
}
