package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// A holder paused past its TTL: A gets fence t and stalls, B obtains t+1 and
// writes; A's late write is refused by the item's fence, and A's release
// leaves B's lock alone.
func TestLockStrategyFenceRefusesStaleHolder(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		store := NewStore(b.DB(t))
		rdb := b.Redis(t)
		locker := lock.New(rdb, nil)
		t.Cleanup(func() { _ = locker.Close() })
		it := &Item{Name: "fenced", Stock: 10, Strategy: StrategyLock}
		if err := store.CreateItem(ctx, it); err != nil {
			t.Fatal(err)
		}
		key := b.KeyPrefix + ":{item:1}:lock"

		a, err := locker.Obtain(ctx, key, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatalf("A obtain: %v", err)
		}
		time.Sleep(120 * time.Millisecond) // A "pauses" past its TTL
		bl, err := locker.Obtain(ctx, key, 5*time.Second, nil)
		if err != nil {
			t.Fatalf("B obtain: %v", err)
		}
		if bl.Fence() != a.Fence()+1 {
			t.Fatalf("fences: A %d, B %d; want B = A+1", a.Fence(), bl.Fence())
		}
		if err := store.InsertOrder(ctx, &Order{ID: "00000000-0000-7000-8000-00000000000b", ItemID: it.ID, UserID: "b"}, "", bl.Fence()); err != nil {
			t.Fatalf("B's write: %v", err)
		}
		err = store.InsertOrder(ctx, &Order{ID: "00000000-0000-7000-8000-00000000000a", ItemID: it.ID, UserID: "a"}, "", a.Fence())
		if !errors.Is(err, errFenceStale) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("A's late write: got %v, want errFenceStale and ErrUnavailable", err)
		}
		got, err := store.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sold != 1 {
			t.Errorf("sold: got %d, want 1 (only B's write)", got.Sold)
		}
		if _, _, err := store.OrderOf(ctx, it.ID, "a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("A's order: got %v, want not found (rolled back)", err)
		}
		if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("A's release: got %v, want ErrNotHeld", err)
		}
		if held, err := bl.Held(ctx); err != nil || !held {
			t.Errorf("B still holds after A's release: got %v, %v; want true", held, err)
		}
		if ttl, err := bl.TTL(ctx); err != nil || ttl <= time.Second {
			t.Errorf("B's TTL after A's release: got %v, %v; want it untouched (> 1s)", ttl, err)
		}
	})
}
