package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

func newQueued(itemID int64, user, key string) *Queued {
	return &Queued{Entry: fmt.Sprintf("%d-0", time.Now().UnixNano()), ID: uuid.Must(uuid.NewV7()).String(),
		ItemID: itemID, UserID: user, Key: key, Created: Now()}
}

// PersistQueued settles every order of a batch exactly: written, already
// done (a redelivery), or failed with the reason, and never takes more
// units than the item has.
func TestPersistQueuedSettlesEveryOrder(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "queued", Stock: 4, Strategy: stock.StrategyLuaAsync}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		// An earlier order holds user "early" and key "shared".
		if err := st.InsertOrder(ctx, OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "early"}, Key: "shared"}, 0); err != nil {
			t.Fatal(err)
		}

		first := []*Queued{newQueued(it.ID, "a", "ka"), newQueued(it.ID, "b", "")}
		res, err := st.PersistQueued(ctx, it.ID, first, Now())
		if err != nil {
			t.Fatalf("first batch: %v", err)
		}
		if len(res.Written) != 2 || len(res.Already) != 0 || len(res.Failed) != 0 {
			t.Fatalf("first batch: got written %d already %d failed %v, want 2 0 none", len(res.Written), len(res.Already), res.Failed)
		}

		// A redelivery of the first batch plus new orders: one by a user
		// who holds an order, one whose key another user holds, the same
		// entry twice, and more orders than the one unit left.
		dupUser := newQueued(it.ID, "early", "")
		keyClash := newQueued(it.ID, "c", "shared")
		d := newQueued(it.ID, "d", "")
		e := newQueued(it.ID, "e", "")
		batch := append(append([]*Queued{}, first...), dupUser, keyClash, keyClash, d, e)
		res, err = st.PersistQueued(ctx, it.ID, batch, Now())
		if err != nil {
			t.Fatalf("second batch: %v", err)
		}
		if got := ids(res.Already); !sameSet(got, []string{first[0].ID, first[1].ID}) {
			t.Errorf("already done: got %v, want the first batch", got)
		}
		if got := ids(res.Written); !sameSet(got, []string{keyClash.ID}) {
			t.Errorf("written: got %v, want only %s (the one unit left, first in stream order)", got, keyClash.ID)
		}
		wantFailed := map[string]string{dupUser.ID: "already_purchased", d.ID: "sold_out", e.ID: "sold_out"}
		if fmt.Sprint(res.Failed) != fmt.Sprint(wantFailed) {
			t.Errorf("failed: got %v, want %v", res.Failed, wantFailed)
		}

		got, err := st.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sold != 4 {
			t.Errorf("sold: got %d, want 4", got.Sold)
		}
		var rows int64
		var nullKey int64
		db := b.DB(t)
		db.Raw("SELECT COUNT(*) FROM orders WHERE item_id = ?", it.ID).Scan(&rows)
		db.Raw("SELECT COUNT(*) FROM orders WHERE id = ? AND idempotency_key IS NULL", keyClash.ID).Scan(&nullKey)
		if rows != 4 {
			t.Errorf("order rows: got %d, want 4", rows)
		}
		if nullKey != 1 {
			t.Errorf("order %s written with the key another user holds; want it written without a key", keyClash.ID)
		}
		for id, reason := range wantFailed {
			o, err := st.FailedOrder(ctx, id)
			if err != nil {
				t.Errorf("failed order %s: %v", id, err)
				continue
			}
			if o.Status != stock.StatusFailed || o.Reason != reason {
				t.Errorf("failed order %s: got %s/%s, want failed/%s", id, o.Status, o.Reason, reason)
			}
		}

		// Everything again: all of it is done now, nothing changes.
		res, err = st.PersistQueued(ctx, it.ID, batch, Now())
		if err != nil {
			t.Fatalf("third batch: %v", err)
		}
		// Six distinct orders (keyClash is in the batch twice).
		if len(res.Written) != 0 || len(res.Failed) != 0 || len(res.Already) != 6 {
			t.Errorf("third batch: got written %d failed %d already %d, want 0 0 6", len(res.Written), len(res.Failed), len(res.Already))
		}
		if got, _ := st.Item(ctx, it.ID); got.Sold != 4 {
			t.Errorf("sold after a full redelivery: got %d, want 4", got.Sold)
		}
	})
}

func ids(qs []*Queued) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.ID
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// An order recorded as failed stays failed when its entry comes back (a
// dead letter moved back to the stream), even once units are free again:
// the batch's first, optimistic try must not write it.
func TestPersistQueuedFailedOrderStaysFailed(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "queued", Stock: 1, Strategy: stock.StrategyLuaAsync}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		a, late := newQueued(it.ID, "a", ""), newQueued(it.ID, "late", "k-late")
		res, err := st.PersistQueued(ctx, it.ID, []*Queued{a, late}, Now())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Failed) != fmt.Sprint(map[string]string{late.ID: "sold_out"}) {
			t.Fatalf("failed: got %v, want %s sold_out", res.Failed, late.ID)
		}
		db := b.DB(t)
		if err := db.Exec("UPDATE items SET stock = 5 WHERE id = ?", it.ID).Error; err != nil {
			t.Fatal(err)
		}
		res, err = st.PersistQueued(ctx, it.ID, []*Queued{late}, Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Written) != 0 || len(res.Failed) != 0 || !sameSet(ids(res.Already), []string{late.ID}) {
			t.Errorf("the failed order again: got written %v failed %v already %v, want it already done", ids(res.Written), res.Failed, ids(res.Already))
		}
		var rows int64
		db.Raw("SELECT COUNT(*) FROM orders WHERE id = ?", late.ID).Scan(&rows)
		if rows != 0 {
			t.Errorf("the failed order %s was written as an order", late.ID)
		}
		if got, _ := st.Item(ctx, it.ID); got.Sold != 1 {
			t.Errorf("sold: got %d, want 1", got.Sold)
		}
	})
}
