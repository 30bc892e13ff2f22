package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// TestRepeatBuyerRefusedFromMemory: once a user without an Idempotency-Key
// was refused as already purchased, the next attempts within
// PurchasedMaxAge are refused without Redis (proved by cutting it: another
// user's attempt fails, hers is still refused as already purchased); a
// keyed replay still finds her order; past PurchasedMaxAge the service asks
// again, and a failed attempt forgets her. Every strategy.
func TestRepeatBuyerRefusedFromMemory(t *testing.T) {
	t.Parallel()
	// Each case has its own item, proxy and service.
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		eachStrategyParallel(t, func(t *testing.T, name stock.StrategyName) {
			ctx := context.Background()
			rdb, proxy, _ := proxied(t, b)
			s := newTestService(t, b, Config{}, rdb)
			clock := &fakeClock{t: time.Now()}
			s.purchased.clock = clock.now
			it, err := s.CreateItem(ctx, stock.NewItem{Name: "memo", Stock: 5, Strategy: name})
			if err != nil {
				t.Fatal(err)
			}
			attempt := func(user, key string) (*stock.Order, bool, error) {
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				return s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user, IdempotencyKey: key})
			}
			first, _, err := attempt("alice", "alice-key-1")
			if err != nil {
				t.Fatalf("alice's first order: %v", err)
			}
			if s.KnownPurchased(it.ID, "alice") {
				t.Fatal("a sale alone taught the memo (only a refusal should)")
			}
			if _, _, err := attempt("alice", ""); !errors.Is(err, stock.ErrAlreadyPurchased) {
				t.Fatalf("alice again: %v, want already purchased", err)
			}
			if !s.KnownPurchased(it.ID, "alice") {
				t.Fatal("the refusal was not remembered")
			}
			// A keyed replay is not answered from memory: it gets the order.
			o, replayed, err := attempt("alice", "alice-key-1")
			if err != nil || !replayed || o.ID != first.ID {
				t.Fatalf("keyed replay while remembered: %+v replayed=%v %v, want order %s replayed", o, replayed, err, first.ID)
			}

			if name == stock.StrategyLock {
				// The item's writer keeps its lock while orders come, and
				// writes bob's with no word to Redis if it still holds it.
				waitUnlocked(t, rdb, fmt.Sprintf("%s:{item:%d}:lock", b.KeyPrefix, it.ID))
			}
			proxy.Cut()
			for i := 0; i < 20; i++ {
				if _, _, err := attempt("alice", ""); !errors.Is(err, stock.ErrAlreadyPurchased) {
					t.Fatalf("alice with Redis cut, attempt %d: %v, want already purchased from memory", i, err)
				}
			}
			if _, _, err := attempt("bob", ""); !errors.Is(err, stock.ErrUnavailable) {
				t.Fatalf("bob with Redis cut: %v, want unavailable (the cut must be real)", err)
			}
			clock.mu.Lock()
			clock.t = clock.t.Add(PurchasedMaxAge)
			clock.mu.Unlock()
			if _, _, err := attempt("alice", ""); !errors.Is(err, stock.ErrUnavailable) {
				t.Fatalf("alice PurchasedMaxAge later, Redis cut: %v, want unavailable (asked again)", err)
			}
			if s.purchased.size() != 0 {
				t.Fatalf("a failed attempt left %d memo entries, want 0", s.purchased.size())
			}
			proxy.Restore()
			// A batch begun while Redis was cut may still be failing (the
			// lock strategy's writer answers the orders queued behind it
			// with a fast 503): a buyer told unavailable tries again.
			again := func(user string) error {
				_, _, err := attempt(user, "")
				for try := 1; errors.Is(err, stock.ErrUnavailable) && try <= buyRetries; try++ {
					time.Sleep(time.Duration(min(try, 10)) * 20 * time.Millisecond)
					_, _, err = attempt(user, "")
				}
				return err
			}
			if err := again("alice"); !errors.Is(err, stock.ErrAlreadyPurchased) {
				t.Fatalf("alice after Redis is back: %v, want already purchased", err)
			}
			if err := again("bob"); err != nil {
				t.Fatalf("bob after Redis is back: %v", err)
			}
		})
	})
}

// TestRememberedBuyerAfterTheSaleEnds: memory never answers for a closed
// sale; the gate (or the lock strategy's window check) says it ended.
func TestRememberedBuyerAfterTheSaleEnds(t *testing.T) {
	t.Parallel()
	// The cases side by side (each its own service and item): they wait
	// out their sales' ends.
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		eachStrategyParallel(t, func(t *testing.T, name stock.StrategyName) {
			ctx := context.Background()
			s := newTestService(t, b, Config{}, nil)
			clock := &fakeClock{t: time.Now()} // frozen: the memo stays fresh
			s.purchased.clock = clock.now
			// A sale of 400 ms, longer (doubled) when the machine was too
			// slow for carol's first order and its repeat to come before
			// its end.
			var it *stock.Item
			var ends time.Time
			req := stock.OrderRequest{UserID: "carol"}
			for window := 400 * time.Millisecond; ; window *= 2 {
				ends = time.Now().Add(window)
				var err error
				it, err = s.CreateItem(ctx, stock.NewItem{Name: "ends", Stock: 5, Strategy: name, EndsAt: &ends})
				if err != nil {
					t.Fatal(err)
				}
				req.ItemID = it.ID
				_, _, err = s.PlaceOrder(ctx, req)
				if err == nil {
					if _, _, err = s.PlaceOrder(ctx, req); err == nil {
						t.Fatal("carol again: a second order, want already purchased")
					}
					if errors.Is(err, stock.ErrAlreadyPurchased) {
						break
					}
				}
				if !errors.Is(err, stock.ErrSaleEnded) || window >= 10*time.Second {
					t.Fatalf("carol's order or its repeat: %v, want an order, then already purchased", err)
				}
				t.Logf("the %v sale ended before carol's order and its repeat; again with twice as long", window)
			}
			time.Sleep(time.Until(ends) + 20*time.Millisecond)
			if !s.KnownPurchased(it.ID, "carol") {
				t.Fatal("the frozen memo forgot carol")
			}
			if _, _, err := s.PlaceOrder(ctx, req); !errors.Is(err, stock.ErrSaleEnded) {
				t.Fatalf("carol after the sale ended: %v, want sale ended", err)
			}
		})
	})
}

// TestPurchaseMemoBounds: an entry holds for less than PurchasedMaxAge;
// the memo never holds more than its bound, dropping expired entries
// first; Forget drops one.
func TestPurchaseMemoBounds(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	advance := func(d time.Duration) { clock.mu.Lock(); clock.t = clock.t.Add(d); clock.mu.Unlock() }
	m := &purchaseMemo{max: 4, clock: clock.now}
	m.Learn(1, "a")
	advance(PurchasedMaxAge - time.Nanosecond)
	if !m.Holds(1, "a") {
		t.Error("just under PurchasedMaxAge: not held")
	}
	if m.Holds(2, "a") || m.Holds(1, "b") {
		t.Error("held for another item or user")
	}
	advance(time.Nanosecond)
	if m.Holds(1, "a") {
		t.Error("PurchasedMaxAge later: still held")
	}
	for i := 0; i < 3; i++ {
		m.Learn(1, fmt.Sprintf("u%d", i)) // with the expired "a": 4
	}
	advance(PurchasedMaxAge / 2)
	m.Learn(1, "fresh") // full: only "a" has expired
	if got := m.size(); got != 4 || m.Holds(1, "a") || !m.Holds(1, "u0") || !m.Holds(1, "fresh") {
		t.Errorf("full with one expired entry: size %d (want 4, \"a\" dropped, the fresh kept)", got)
	}
	for i := 0; i < 100; i++ {
		m.Learn(2, fmt.Sprintf("flood%d", i))
		if got := m.size(); got > 4 {
			t.Fatalf("memo holds %d entries, bound 4", got)
		}
	}
	m.Forget(2, "flood99")
	if m.Holds(2, "flood99") {
		t.Error("forgotten, still held")
	}
}

// TestRememberedBuyerAcrossInstances: the memo's bound across instances.
// Instance b refuses alice while a reservation of hers lives in the gate
// (instance a's write in flight) and remembers it; a hands the reservation
// back (its write failed); b still refuses her from memory, for less than
// PurchasedMaxAge, then asks the gate again and sells.
func TestRememberedBuyerAcrossInstances(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		a := newTestService(t, b, Config{}, nil)
		bs := newTestService(t, b, Config{}, nil)
		clock := &fakeClock{t: time.Now()}
		bs.purchased.clock = clock.now
		it, err := a.CreateItem(ctx, stock.NewItem{Name: "peers", Stock: 3, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		home := gate.HomeBucket(it.ID, it.Buckets, "alice")
		id, err := uuid.NewV7() // fresh: not taken for an orphan
		if err != nil {
			t.Fatal(err)
		}
		inFlight := id.String()
		if _, err := a.lua.reserve(ctx, home, "alice", inFlight); err != nil {
			t.Fatalf("a reserves for alice: %v", err)
		}
		req := stock.OrderRequest{ItemID: it.ID, UserID: "alice"}
		if _, _, err := bs.PlaceOrder(ctx, req); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Fatalf("alice on b while a's write is in flight: %v, want already purchased", err)
		}
		if back, err := a.lua.handBackNow(ctx, home, "alice", inFlight, ""); err != nil || !back {
			t.Fatalf("a hands alice's reservation back: back=%v %v", back, err)
		}
		clock.mu.Lock()
		clock.t = clock.t.Add(PurchasedMaxAge - time.Millisecond)
		clock.mu.Unlock()
		if _, _, err := bs.PlaceOrder(ctx, req); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Fatalf("alice on b within PurchasedMaxAge: %v, want already purchased (remembered)", err)
		}
		clock.mu.Lock()
		clock.t = clock.t.Add(time.Millisecond)
		clock.mu.Unlock()
		o, _, err := bs.PlaceOrder(ctx, req)
		if err != nil {
			t.Fatalf("alice on b PurchasedMaxAge after the refusal: %v, want her order", err)
		}
		if got, err := a.Order(ctx, o.ID); err != nil || got.UserID != "alice" {
			t.Fatalf("alice's order read on a: %+v %v", got, err)
		}
	})
}
