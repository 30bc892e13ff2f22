package app_test

// Every piece of state an instance keeps in memory that another instance
// can invalidate (docs/DESIGN.md, "Several instances"), each with a test in
// which instance A changes it and instance B, on the same database and
// Redis, must still keep every promise.

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// peerBound is how soon a change made through one instance must be honoured
// by another whose memory still holds the old state: pub/sub delivers it at
// once, and it must come well before the sold-out memo's 10 s safety expiry
// (gate.Memo), so only the events can pass this.
const peerBound = 5 * time.Second

// ok2xx reports an order accepted (201, or 202 for lua-async).
func ok2xx(r apptest.Response) bool {
	return r.Status == http.StatusCreated || r.Status == http.StatusAccepted
}

// mustOrder places an order and fails the test unless it is accepted.
func mustOrder(t *testing.T, c *apptest.Client, itemID int64, user, key string) apptest.Order {
	t.Helper()
	r, err := c.PlaceOrder(itemID, user, key)
	if err != nil || !ok2xx(r) {
		t.Fatalf("order by %s: got %d %s %v, want 201 or 202", user, r.Status, r.Body, err)
	}
	var o apptest.Order
	r.JSON(t, &o)
	return o
}

// wantRefused places an order and fails the test unless it gets 409 code.
func wantRefused(t *testing.T, c *apptest.Client, itemID int64, user, code string) {
	t.Helper()
	r, err := c.PlaceOrder(itemID, user, "")
	if err != nil || r.Status != http.StatusConflict || r.ErrorCode() != code {
		t.Fatalf("order by %s: got %d %s %v, want 409 %s", user, r.Status, r.Body, err, code)
	}
}

// eventually polls try until it returns "" or bound passes; then it fails
// the test with try's last complaint.
func eventually(t *testing.T, bound time.Duration, what string, try func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		msg := try()
		if msg == "" {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %s: %s", what, bound, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// publicRemaining is the public item view's remaining, as c serves it.
func publicRemaining(t *testing.T, c *apptest.Client, id int64) int64 {
	t.Helper()
	r := c.Must(t, "GET", fmt.Sprintf("/api/v1/items/%d", id), nil, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("public item: got %d %s", r.Status, r.Body)
	}
	var v struct{ Remaining int64 }
	r.JSON(t, &v)
	return v.Remaining
}

func setStock(t *testing.T, c *apptest.Client, id, n int64) apptest.Response {
	t.Helper()
	return c.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/stock", id), map[string]int64{"stock": n}, true, nil)
}

// checkDB checks the item's row against its orders: sold == live orders
// <= stock, one order per user; it returns sold and stock.
func checkDB(t *testing.T, b testenv.Backend, id int64) (sold, stock int64) {
	t.Helper()
	db := b.DB(t)
	var row struct{ Stock, Sold int64 }
	if err := db.Raw("SELECT stock, sold FROM items WHERE id = ?", id).Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	var live, users int64
	if err := db.Raw("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE item_id = ? AND status <> 'cancelled'", id).Row().Scan(&live, &users); err != nil {
		t.Fatal(err)
	}
	if row.Sold != live || live > row.Stock || users != live {
		t.Errorf("item %d in the database: stock %d sold %d, %d live orders of %d users; want sold == orders <= stock, one per user",
			id, row.Stock, row.Sold, live, users)
	}
	return row.Sold, row.Stock
}

// twoInstances starts A and B on one shared backend, with the per-user
// rate limit off unless edit sets it (the tests send bursts per user).
func twoInstances(t *testing.T, fn func(t *testing.T, b testenv.Backend, a, bb *apptest.Client), edit ...func(*app.Config)) {
	t.Helper()
	edit = append([]func(*app.Config){func(c *app.Config) { c.RateUser = "0" }}, edit...)
	forEachShared(t, func(t *testing.T, b testenv.Backend) {
		_, a := apptest.Start(t, b, edit...)
		_, bb := apptest.Start(t, b, edit...)
		fn(t, b, a, bb)
	})
}

// TestPeerSeesNewItemAndItsWindow: the routing cache (shop's item cache,
// which holds strategy and sale window and never expires) does not
// remember a miss: an id B found no item under is sold by B once A creates
// it, and B honours the sale window A set.
func TestPeerSeesNewItemAndItsWindow(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				last := a.CreateItem(t, 1, strategy)
				next := last.ID + 1
				if r, _ := bb.PlaceOrder(next, "early", ""); r.Status != http.StatusNotFound {
					t.Fatalf("B, order on item %d before it exists: got %d %s, want 404", next, r.Status, r.Body)
				}
				if r := bb.Must(t, "GET", fmt.Sprintf("/api/v1/items/%d", next), nil, false, nil); r.Status != http.StatusNotFound {
					t.Fatalf("B, view of item %d before it exists: got %d, want 404", next, r.Status)
				}
				startsAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
				r := a.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "window", "stock": 2, "strategy": strategy,
					"starts_at": startsAt.Format(time.RFC3339)}, true, nil)
				var it apptest.Item
				r.JSON(t, &it)
				if r.Status != http.StatusCreated || it.ID != next {
					t.Fatalf("A creates: got %d %s, want 201 with id %d (another test created items meanwhile?)", r.Status, r.Body, next)
				}
				wantRefused(t, bb, it.ID, "early", "sale_not_started")
				time.Sleep(time.Until(startsAt) + 50*time.Millisecond)
				mustOrder(t, bb, it.ID, "on-time", "")
				mustOrder(t, a, it.ID, "on-time-a", "")
				wantRefused(t, bb, it.ID, "late", "sold_out")
				if s := bb.AdminItem(t, it.ID); s.Sold != 2 {
					// lua-async: wait for the writers
					eventually(t, 30*time.Second, "B's admin view", func() string {
						if s := bb.AdminItem(t, it.ID); s.Sold != 2 {
							return fmt.Sprintf("sold %d, want 2", s.Sold)
						}
						return ""
					})
				}
				checkDB(t, b, it.ID)
			})
		}
	})
}

// TestPeerSellsAfterRestock: B knows the item is sold out (its memo, and
// a public view cached with 0 left); A raises the stock. B must sell the
// new units within peerBound and show them in its view, and never more.
func TestPeerSellsAfterRestock(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				it := a.CreateItem(t, 1, strategy)
				mustOrder(t, bb, it.ID, "first", "")
				wantRefused(t, bb, it.ID, "second", "sold_out") // B's memo marks it
				if got := publicRemaining(t, bb, it.ID); got != 0 {
					t.Fatalf("B's view after its sell-out: remaining %d, want 0", got)
				}
				if r := setStock(t, a, it.ID, 3); r.Status != http.StatusOK {
					t.Fatalf("A raises stock: got %d %s", r.Status, r.Body)
				}
				took := eventually(t, peerBound, "B's view shows the new units", func() string {
					if got := publicRemaining(t, bb, it.ID); got != 2 {
						return fmt.Sprintf("remaining %d, want 2", got)
					}
					return ""
				})
				t.Logf("B's view caught up in %s", took)
				eventually(t, peerBound, "B sells the new units", func() string {
					r, err := bb.PlaceOrder(it.ID, "second", "")
					if err != nil || !ok2xx(r) {
						return fmt.Sprintf("got %d %s %v", r.Status, r.Body, err)
					}
					return ""
				})
				mustOrder(t, bb, it.ID, "third", "")
				wantRefused(t, bb, it.ID, "fourth", "sold_out")
				wantRefused(t, a, it.ID, "fourth", "sold_out")
				eventually(t, 30*time.Second, "orders written", func() string {
					if s := a.AdminItem(t, it.ID); s.Sold != 3 || s.Remaining != 0 {
						return fmt.Sprintf("sold %d remaining %d, want 3 and 0", s.Sold, s.Remaining)
					}
					return ""
				})
				checkDB(t, b, it.ID)
			})
		}
	})
}

// TestPeerNeverOversellsWhenStockLowered: A lowers the stock from 60 to 30
// after B has routed and sold the item, then buyers stampede A and B while
// A lowers it again to 20; whatever B has in memory, the item ends with
// sold == orders == the final stock (demand exceeds it: no unit is lost
// either).
func TestPeerNeverOversellsWhenStockLowered(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				it := a.CreateItem(t, 60, strategy)
				mustOrder(t, bb, it.ID, "warm", "") // B routes and gates the item
				// B has not seen this change.
				if r := setStock(t, a, it.ID, 30); r.Status != http.StatusOK {
					t.Fatalf("A lowers stock to 30: got %d %s", r.Status, r.Body)
				}
				cs := []*apptest.Client{a, bb}
				const users = 300
				var wg sync.WaitGroup
				var mu sync.Mutex
				acked := map[string]bool{}
				start := make(chan struct{})
				for u := range users {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						user := fmt.Sprintf("buyer-%d", u)
						r, err := cs[u%2].PlaceOrder(it.ID, user, "")
						switch {
						case err != nil:
							t.Errorf("%s: %v", user, err)
						case ok2xx(r):
							mu.Lock()
							acked[user] = true
							mu.Unlock()
						case r.Status == http.StatusConflict && r.ErrorCode() == "sold_out":
						default:
							t.Errorf("%s: got %d %s, want 2xx or 409 sold_out", user, r.Status, r.Body)
						}
					}()
				}
				close(start)
				lowered := setStock(t, a, it.ID, 20) // races the stampede
				wg.Wait()
				want := int64(30)
				switch {
				case lowered.Status == http.StatusOK:
					want = 20
				case lowered.Status == http.StatusConflict && lowered.ErrorCode() == "stock_below_sold":
				default:
					t.Fatalf("lower stock: got %d %s", lowered.Status, lowered.Body)
				}
				t.Logf("lowering: %d %s; %d acknowledged", lowered.Status, lowered.ErrorCode(), len(acked)+1)
				if int64(len(acked))+1 != want {
					t.Errorf("acknowledged orders: got %d, want the final stock %d", len(acked)+1, want)
				}
				eventually(t, 30*time.Second, "orders written", func() string {
					if s := bb.AdminItem(t, it.ID); s.Sold != want || s.Stock != want || s.Remaining != 0 {
						return fmt.Sprintf("B's admin view: stock %d sold %d remaining %d, want %d %d 0", s.Stock, s.Sold, s.Remaining, want, want)
					}
					return ""
				})
				if sold, stock := checkDB(t, b, it.ID); sold != want || stock != want {
					t.Errorf("database: stock %d sold %d, want %d and %d", stock, sold, want, want)
				}
				// And after the sale, the lowered stock holds on both.
				wantRefused(t, bb, it.ID, "after", "sold_out")
				wantRefused(t, a, it.ID, "after", "sold_out")
			})
		}
	})
}

// TestPeerResellsACancelledUnit: the item sold out on B (memo, cached
// view); its buyer cancels through A. B shows the unit and sells it within
// peerBound, once; its admin view agrees.
func TestPeerResellsACancelledUnit(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				it := a.CreateItem(t, 1, strategy)
				o := mustOrder(t, bb, it.ID, "canceller", "")
				if got := bb.AwaitOrder(t, o.ID, 30*time.Second); got.Status != "created" {
					t.Fatalf("order %s: %s, want created", o.ID, got.Status)
				}
				wantRefused(t, bb, it.ID, "waiting", "sold_out")
				if got := publicRemaining(t, bb, it.ID); got != 0 {
					t.Fatalf("B's view: remaining %d, want 0", got)
				}
				r, err := a.SettleOrder(o.ID, "cancel", map[string]string{"user_id": "canceller"}, nil)
				if err != nil || r.Status != http.StatusOK {
					t.Fatalf("A cancels: got %d %s %v", r.Status, r.Body, err)
				}
				eventually(t, peerBound, "B's view shows the returned unit", func() string {
					if got := publicRemaining(t, bb, it.ID); got != 1 {
						return fmt.Sprintf("remaining %d, want 1", got)
					}
					return ""
				})
				if s := bb.AdminItem(t, it.ID); s.Sold != 0 || s.Remaining != 1 {
					t.Errorf("B's admin view after the cancel: sold %d remaining %d, want 0 and 1", s.Sold, s.Remaining)
				}
				eventually(t, peerBound, "B sells the returned unit", func() string {
					r, err := bb.PlaceOrder(it.ID, "waiting", "")
					if err != nil || !ok2xx(r) {
						return fmt.Sprintf("got %d %s %v", r.Status, r.Body, err)
					}
					return ""
				})
				wantRefused(t, bb, it.ID, "third", "sold_out")
				wantRefused(t, a, it.ID, "third", "sold_out")
				if got := a.AwaitOrder(t, o.ID, time.Second); got.Status != "cancelled" {
					t.Errorf("the cancelled order: %s, want cancelled", got.Status)
				}
				eventually(t, 30*time.Second, "orders written", func() string {
					if s := a.AdminItem(t, it.ID); s.Sold != 1 || s.Remaining != 0 {
						return fmt.Sprintf("sold %d remaining %d, want 1 and 0", s.Sold, s.Remaining)
					}
					return ""
				})
				checkDB(t, b, it.ID)
			})
		}
	})
}

// TestPeerSellsAfterGateLoss: Redis loses an item's keys (its gate, buyers,
// idempotency claims, queue: a FLUSHALL of that item) while both instances
// hold it in memory (routing, views, lock fences). Orders through either
// instance rebuild it from the database; the earlier buyers stay refused
// and exactly the rest of the stock sells.
func TestPeerSellsAfterGateLoss(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		rdb := b.Universal(t)
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				it := a.CreateItem(t, 40, strategy)
				cs := []*apptest.Client{a, bb}
				var first []string
				for u := range 10 {
					o := mustOrder(t, cs[u%2], it.ID, fmt.Sprintf("before-%d", u), fmt.Sprintf("k-before-%d", u))
					first = append(first, o.ID)
				}
				for _, id := range first { // a queued order lost with Redis is a documented loss: drain first
					if got := a.AwaitOrder(t, id, 30*time.Second); got.Status != "created" {
						t.Fatalf("order %s: %s, want created", id, got.Status)
					}
				}
				publicRemaining(t, bb, it.ID) // B caches a view
				testenv.DeleteKeys(t, rdb, fmt.Sprintf("%s:{item:%d}*", b.KeyPrefix, it.ID))
				// The earlier buyers' keys replay their orders on the other instance.
				for u, id := range first[:5] {
					o := mustOrder(t, cs[(u+1)%2], it.ID, fmt.Sprintf("before-%d", u), fmt.Sprintf("k-before-%d", u))
					if o.ID != id {
						t.Errorf("replay of before-%d after the loss: order %s, want %s", u, o.ID, id)
					}
				}

				var wg sync.WaitGroup
				var mu sync.Mutex
				acked := 0
				start := make(chan struct{})
				for u := range 100 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						user := fmt.Sprintf("after-%d", u)
						if u < 10 {
							user = fmt.Sprintf("before-%d", u) // earlier buyers, without their keys
						}
						r, err := cs[u%2].PlaceOrder(it.ID, user, "")
						switch {
						case err != nil:
							t.Errorf("%s: %v", user, err)
						case ok2xx(r):
							if u < 10 {
								t.Errorf("%s bought a second unit after the gate was lost: %d %s", user, r.Status, r.Body)
							}
							mu.Lock()
							acked++
							mu.Unlock()
						case r.Status == http.StatusConflict && (r.ErrorCode() == "sold_out" || r.ErrorCode() == "already_purchased"):
						default:
							t.Errorf("%s: got %d %s", user, r.Status, r.Body)
						}
					}()
				}
				close(start)
				wg.Wait()
				// An earlier buyer may have taken a unit in the rebuilt gate
				// before the database refused it; the unit is handed back,
				// perhaps after the stampede: later buyers get it. No unit
				// is lost, none sold twice.
				late := 0
				eventually(t, 10*time.Second, "every unit sold", func() string {
					if acked >= 30 {
						return ""
					}
					late++
					if r, err := cs[late%2].PlaceOrder(it.ID, fmt.Sprintf("late-%d", late), ""); err == nil && ok2xx(r) {
						acked++
					}
					return fmt.Sprintf("%d of the 30 units left sold", acked)
				})
				t.Logf("%d late buyers", late)
				wantRefused(t, bb, it.ID, "last", "sold_out")
				if acked != 30 {
					t.Errorf("orders acknowledged after the loss: got %d, want the 30 units left", acked)
				}
				eventually(t, 30*time.Second, "orders written", func() string {
					if s := bb.AdminItem(t, it.ID); s.Sold != 40 || s.Remaining != 0 {
						return fmt.Sprintf("B's admin view: sold %d remaining %d, want 40 and 0", s.Sold, s.Remaining)
					}
					return ""
				})
				if sold, _ := checkDB(t, b, it.ID); sold != 40 {
					t.Errorf("database sold %d, want 40", sold)
				}
				eventually(t, peerBound, "B's view", func() string {
					if got := publicRemaining(t, bb, it.ID); got != 0 {
						return fmt.Sprintf("remaining %d, want 0", got)
					}
					return ""
				})
			})
		}
	})
}
