package shop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

func newQueued(itemID int64, user, key string) *queued {
	return &queued{entry: fmt.Sprintf("%d-0", time.Now().UnixNano()), id: uuid.Must(uuid.NewV7()).String(),
		itemID: itemID, userID: user, key: key, created: dbNow()}
}

// persistQueued settles every order of a batch exactly: written, already
// done (a redelivery), or failed with the reason, and never takes more
// units than the item has.
func TestPersistQueuedSettlesEveryOrder(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		store := NewStore(b.DB(t))
		it := &stock.Item{Name: "queued", Stock: 4, Strategy: stock.StrategyLuaAsync}
		if err := store.CreateItem(ctx, it); err != nil {
			t.Fatal(err)
		}
		// An earlier order holds user "early" and key "shared".
		if err := store.InsertOrder(ctx, &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "early"}, "shared", 0); err != nil {
			t.Fatal(err)
		}

		first := []*queued{newQueued(it.ID, "a", "ka"), newQueued(it.ID, "b", "")}
		res, err := store.persistQueued(ctx, it.ID, first, dbNow())
		if err != nil {
			t.Fatalf("first batch: %v", err)
		}
		if len(res.written) != 2 || len(res.already) != 0 || len(res.failed) != 0 {
			t.Fatalf("first batch: got written %d already %d failed %v, want 2 0 none", len(res.written), len(res.already), res.failed)
		}

		// A redelivery of the first batch plus new orders: one by a user
		// who holds an order, one whose key another user holds, the same
		// entry twice, and more orders than the one unit left.
		dupUser := newQueued(it.ID, "early", "")
		keyClash := newQueued(it.ID, "c", "shared")
		d := newQueued(it.ID, "d", "")
		e := newQueued(it.ID, "e", "")
		batch := append(append([]*queued{}, first...), dupUser, keyClash, keyClash, d, e)
		res, err = store.persistQueued(ctx, it.ID, batch, dbNow())
		if err != nil {
			t.Fatalf("second batch: %v", err)
		}
		if got := ids(res.already); !sameSet(got, []string{first[0].id, first[1].id}) {
			t.Errorf("already done: got %v, want the first batch", got)
		}
		if got := ids(res.written); !sameSet(got, []string{keyClash.id}) {
			t.Errorf("written: got %v, want only %s (the one unit left, first in stream order)", got, keyClash.id)
		}
		wantFailed := map[string]string{dupUser.id: "already_purchased", d.id: "sold_out", e.id: "sold_out"}
		if fmt.Sprint(res.failed) != fmt.Sprint(wantFailed) {
			t.Errorf("failed: got %v, want %v", res.failed, wantFailed)
		}

		got, err := store.Item(ctx, it.ID)
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
		db.Raw("SELECT COUNT(*) FROM orders WHERE id = ? AND idempotency_key IS NULL", keyClash.id).Scan(&nullKey)
		if rows != 4 {
			t.Errorf("order rows: got %d, want 4", rows)
		}
		if nullKey != 1 {
			t.Errorf("order %s written with the key another user holds; want it written without a key", keyClash.id)
		}
		for id, reason := range wantFailed {
			o, err := store.failedOrder(ctx, id)
			if err != nil {
				t.Errorf("failed order %s: %v", id, err)
				continue
			}
			if o.Status != stock.StatusFailed || o.Reason != reason {
				t.Errorf("failed order %s: got %s/%s, want failed/%s", id, o.Status, o.Reason, reason)
			}
		}

		// Everything again: all of it is done now, nothing changes.
		res, err = store.persistQueued(ctx, it.ID, batch, dbNow())
		if err != nil {
			t.Fatalf("third batch: %v", err)
		}
		// Six distinct orders (keyClash is in the batch twice).
		if len(res.written) != 0 || len(res.failed) != 0 || len(res.already) != 6 {
			t.Errorf("third batch: got written %d failed %d already %d, want 0 0 6", len(res.written), len(res.failed), len(res.already))
		}
		if got, _ := store.Item(ctx, it.ID); got.Sold != 4 {
			t.Errorf("sold after a full redelivery: got %d, want 4", got.Sold)
		}
	})
}

func ids(qs []*queued) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.id
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
