package app_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// buy places an order for user and returns it, failing the test otherwise.
func buy(t *testing.T, c *apptest.Client, itemID int64, user string) apptest.Order {
	t.Helper()
	r, err := c.PlaceOrder(itemID, user, "")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("order by %s: got %d %s %v, want 201", user, r.Status, r.Body, err)
	}
	var o apptest.Order
	r.JSON(t, &o)
	return o
}

// orderStatus reads an order's status over the API.
func orderStatus(t *testing.T, c *apptest.Client, id string) string {
	t.Helper()
	r := c.Must(t, "GET", "/api/v1/orders/"+id, nil, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("read order %s: got %d %s, want 200", id, r.Status, r.Body)
	}
	var o apptest.Order
	r.JSON(t, &o)
	return o.Status
}

// TestOrderLifecycle: the transitions and their error codes over HTTP, on
// both strategies and backends, then what they did to the stock.
func TestOrderLifecycle(t *testing.T) {
	t.Parallel()
	type step struct {
		action string // pay or cancel
		body   any    // nil: {"user_id": <the order's user>}
		status int
		want   string // the order's status on 200, the error code otherwise
	}
	cases := []struct {
		name  string
		steps []step
		live  bool // the order still holds its unit at the end
	}{
		{"pay, repeat, then cancel", []step{
			{"pay", nil, 200, "paid"}, {"pay", nil, 200, "paid"}, {"cancel", nil, 409, "order_paid"},
		}, true},
		{"cancel, repeat, then pay", []step{
			{"cancel", nil, 200, "cancelled"}, {"cancel", nil, 200, "cancelled"}, {"pay", nil, 409, "order_cancelled"},
		}, false},
		{"another user's order", []step{
			{"pay", map[string]string{"user_id": "mallory"}, 404, "not_found"},
			{"cancel", map[string]string{"user_id": "mallory"}, 404, "not_found"},
		}, true},
		{"bad input changes nothing", []step{
			{"pay", `{}`, 400, "invalid_request"},
			{"pay", ``, 400, "invalid_request"},
			{"cancel", `{"user_id":`, 400, "invalid_request"},
			{"cancel", `{"user_id":"x","extra":1}`, 400, "invalid_request"},
			{"pay", `{"user_id":42}`, 400, "invalid_request"},
			{"cancel", `{"user_id":"bad user!"}`, 400, "invalid_request"},
			{"pay", `[]`, 400, "invalid_request"},
		}, true},
	}
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.PaymentTimeout = time.Hour })
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, int64(len(cases)), strategy)
				live := int64(0)
				for i, tc := range cases {
					user := fmt.Sprintf("%s-buyer-%d", strategy, i)
					o := buy(t, c, it.ID, user)
					if o.ExpiresAt == nil || !o.ExpiresAt.Equal(o.CreatedAt.Add(time.Hour)) {
						t.Errorf("%s: expires_at %v, want created_at %v + 1h", tc.name, o.ExpiresAt, o.CreatedAt)
					}
					for j, s := range tc.steps {
						body := s.body
						if body == nil {
							body = map[string]string{"user_id": user}
						}
						r, err := c.SettleOrder(o.ID, s.action, body, nil)
						if err != nil {
							t.Fatal(err)
						}
						got := r.ErrorCode()
						if r.Status == http.StatusOK {
							var after apptest.Order
							r.JSON(t, &after)
							got = after.Status
							if after.ID != o.ID || after.UserID != user || !reflect.DeepEqual(after.ExpiresAt, o.ExpiresAt) {
								t.Errorf("%s, step %d: answered order %+v, want order %s of %s", tc.name, j, after, o.ID, user)
							}
						}
						if r.Status != s.status || got != s.want {
							t.Errorf("%s, step %d (%s %v): got %d %s, want %d %s", tc.name, j, s.action, body, r.Status, r.Body, s.status, s.want)
						}
					}
					if tc.live {
						live++
						if tc.steps[0].status != 200 && orderStatus(t, c, o.ID) != "created" {
							t.Errorf("%s: the order changed", tc.name)
						}
					}
				}
				if got := c.AdminItem(t, it.ID); got.Sold != live || got.Remaining != got.Stock-live {
					t.Errorf("item after the transitions: sold %d remaining %d, want sold %d (the live orders)", got.Sold, got.Remaining, live)
				}
				// The cancelled order's unit sells again, to somebody else;
				// its own user still holds their one order.
				if r, _ := c.PlaceOrder(it.ID, strategy+"-buyer-1", ""); r.Status != http.StatusConflict || r.ErrorCode() != "already_purchased" {
					t.Errorf("the cancelled order's user buys again: got %d %s, want 409 already_purchased", r.Status, r.Body)
				}
				buy(t, c, it.ID, strategy+"-newcomer")
				if r, _ := c.PlaceOrder(it.ID, strategy+"-late", ""); r.Status != http.StatusConflict || r.ErrorCode() != "sold_out" {
					t.Errorf("one more buyer: got %d %s, want 409 sold_out", r.Status, r.Body)
				}
			})
		}
		t.Run("unknown and malformed order ids", func(t *testing.T) {
			body := map[string]string{"user_id": "anyone"}
			for id, want := range map[string]int{"01a20197-766a-7198-9a10-76030851c922": 404, "not-a-uuid": 400, "01A20197-766A-7198-9A10-76030851C922": 400} {
				if r, _ := c.SettleOrder(id, "pay", body, nil); r.Status != want {
					t.Errorf("pay order %q: got %d %s, want %d", id, r.Status, r.Body, want)
				}
			}
		})
		t.Run("metrics", func(t *testing.T) {
			r := c.Must(t, "GET", "/metrics", nil, false, nil)
			series := parseMetrics(t, string(r.Body))
			for _, strategy := range []string{"lua", "lock"} {
				for _, want := range []string{
					`seckill_order_transitions_total{strategy="` + strategy + `",to="paid"}`,
					`seckill_order_transitions_total{strategy="` + strategy + `",to="cancelled"}`,
					`seckill_stock_returns_total{strategy="` + strategy + `",via="cancellation"}`,
				} {
					if series[want] != 1 {
						t.Errorf("%s: got %v, want 1", want, series[want])
					}
				}
			}
		})
	})
}

// TestOrderExpiry: an order unpaid past its deadline is cancelled by the
// app's sweeper, or by a payment that comes first (409 order_expired either
// way), and its unit sells again. The deadlines pass on a clock the test
// moves (an hour's payment timeout, the clock an hour and a minute ahead,
// then back), not in real time: with a short real timeout the orders of
// the second chance could expire too before the third buyer came.
func TestOrderExpiry(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		clock := &movedClock{}
		_, c := apptest.Start(t, b, func(cfg *app.Config) {
			cfg.PaymentTimeout = time.Hour
			cfg.Now = clock.Now
		})
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 2, strategy)
				late := buy(t, c, it.ID, "late-payer")
				idle := buy(t, c, it.ID, "never-pays")
				clock.Set(time.Hour + time.Minute) // both deadlines pass
				r, _ := c.SettleOrder(late.ID, "pay", map[string]string{"user_id": "late-payer"}, nil)
				if r.Status != http.StatusConflict || r.ErrorCode() != "order_expired" {
					t.Errorf("pay after the deadline: got %d %s, want 409 order_expired", r.Status, r.Body)
				}
				if r, _ := c.SettleOrder(late.ID, "cancel", map[string]string{"user_id": "late-payer"}, nil); r.Status != http.StatusOK {
					t.Errorf("cancel an expired order: got %d %s, want 200", r.Status, r.Body)
				}
				// Nobody touches the other order: the sweeper (every
				// second) expires it. Not a latency bound: a generous
				// wait for the event.
				deadline := time.Now().Add(30 * time.Second)
				for orderStatus(t, c, idle.ID) != "cancelled" {
					if time.Now().After(deadline) {
						t.Fatal("the sweeper did not expire an unpaid order within 30s")
					}
					time.Sleep(50 * time.Millisecond)
				}
				if got := c.AdminItem(t, it.ID); got.Sold != 0 {
					t.Errorf("sold after both expired: got %d, want 0", got.Sold)
				}
				clock.Set(0) // the new orders are an hour from their deadline
				buy(t, c, it.ID, "second-chance-1")
				buy(t, c, it.ID, "second-chance-2")
				if r, _ := c.PlaceOrder(it.ID, "third", ""); r.ErrorCode() != "sold_out" {
					t.Errorf("a third buyer: got %d %s, want sold_out", r.Status, r.Body)
				}
			})
		}
	})
}

// movedClock is the real clock moved by what Set says.
type movedClock struct {
	mu    sync.Mutex
	ahead time.Duration
}

func (c *movedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

// Set puts the clock d ahead of the real one.
func (c *movedClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ahead = d
}

// TestOrderLifecycleJWT: in JWT mode the token names the user, the body may
// be empty and its user_id is ignored, and another user's order is 404.
func TestOrderLifecycleJWT(t *testing.T) {
	t.Parallel()
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) {
		cfg.UserJWTSecret = jwtSecret
		cfg.PaymentTimeout = time.Hour
	})
	it := c.CreateItem(t, 5, "lua")
	exp := time.Now().Add(time.Hour).Unix()
	alice := map[string]string{"Authorization": token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "alice", "exp": exp})}
	bob := map[string]string{"Authorization": token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "bob", "exp": exp})}
	place := func(h map[string]string) string {
		r := c.Must(t, "POST", "/api/v1/items/"+strconv.FormatInt(it.ID, 10)+"/orders", "{}", false, h)
		if r.Status != http.StatusCreated {
			t.Fatalf("order: got %d %s", r.Status, r.Body)
		}
		var o apptest.Order
		r.JSON(t, &o)
		return o.ID
	}
	a, bo := place(alice), place(bob)
	steps := []struct {
		name   string
		id     string
		action string
		body   any
		header map[string]string
		status int
	}{
		{"no token", a, "pay", nil, nil, 401},
		{"bob pays alice's order", a, "pay", nil, bob, 404},
		{"bob names alice in the body", a, "cancel", map[string]string{"user_id": "alice"}, bob, 404},
		{"alice pays, no body", a, "pay", nil, alice, 200},
		{"alice pays again, empty object", a, "pay", "{}", alice, 200},
		{"bob cancels his, another user in the body", bo, "cancel", map[string]string{"user_id": "alice"}, bob, 200},
		{"a malformed body is still refused", bo, "cancel", "{", bob, 400},
	}
	for _, s := range steps {
		r, err := c.SettleOrder(s.id, s.action, s.body, s.header)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != s.status {
			t.Errorf("%s: got %d %s, want %d", s.name, r.Status, r.Body, s.status)
		}
	}
	if got := c.AdminItem(t, it.ID).Sold; got != 1 {
		t.Errorf("sold: got %d, want 1 (alice paid, bob cancelled)", got)
	}
}

// TestBadSettleRequestsChangeNothing: refused pay and cancel requests leave
// every row and every Redis key as they were.
func TestBadSettleRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	b := testenv.Embedded(t)
	_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.PaymentTimeout = time.Hour })
	e := &fuzzEnv{b: b, c: c, db: b.DB(t), rdb: b.Redis(t)}
	e.it = c.CreateItem(t, 5, "lua")
	o := buy(t, c, e.it.ID, "owner")
	for _, r := range []struct {
		name, path string
		body       any
	}{
		{"pay by another user", "/api/v1/orders/" + o.ID + "/pay", map[string]string{"user_id": "intruder"}},
		{"cancel by another user", "/api/v1/orders/" + o.ID + "/cancel", map[string]string{"user_id": "intruder"}},
		{"unknown field", "/api/v1/orders/" + o.ID + "/cancel", `{"user_id":"owner","reason":"x"}`},
		{"two objects", "/api/v1/orders/" + o.ID + "/pay", `{"user_id":"owner"} {"user_id":"owner"}`},
		{"body too large", "/api/v1/orders/" + o.ID + "/pay", strings.Repeat(" ", 70<<10)},
		{"uppercase id", "/api/v1/orders/" + strings.ToUpper(o.ID) + "/cancel", map[string]string{"user_id": "owner"}},
		{"no such action", "/api/v1/orders/" + o.ID + "/refund", map[string]string{"user_id": "owner"}},
	} {
		t.Run(r.name, func(t *testing.T) { e.check(t, http.MethodPost, r.path, toBytes(t, r.body), false, nil) })
	}
	if got := orderStatus(t, c, o.ID); got != "created" {
		t.Errorf("order after the refused requests: got %s, want created", got)
	}
}

func toBytes(t *testing.T, body any) []byte {
	t.Helper()
	if s, ok := body.(string); ok {
		return []byte(s)
	}
	m := body.(map[string]string)
	return []byte(`{"user_id":"` + m["user_id"] + `"}`)
}

// TestCancelledOrderStillCountsAsTheUsersOrder: after a cancellation the
// original Idempotency-Key replays the order, now cancelled, and the user
// cannot buy the item again; somebody else gets the unit.
func TestCancelledOrderStillCountsAsTheUsersOrder(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.PaymentTimeout = time.Hour })
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 1, strategy)
				r, _ := c.PlaceOrder(it.ID, "alice", "alice-key")
				if r.Status != http.StatusCreated {
					t.Fatalf("order: got %d %s", r.Status, r.Body)
				}
				var o apptest.Order
				r.JSON(t, &o)
				if r, _ := c.SettleOrder(o.ID, "cancel", map[string]string{"user_id": "alice"}, nil); r.Status != http.StatusOK {
					t.Fatalf("cancel: got %d %s", r.Status, r.Body)
				}
				r, _ = c.PlaceOrder(it.ID, "alice", "alice-key")
				var replay apptest.Order
				if r.Status == http.StatusCreated {
					r.JSON(t, &replay)
				}
				if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || replay.ID != o.ID || replay.Status != "cancelled" {
					t.Errorf("replay of the key: got %d %s (replayed %q), want 201 with order %s, cancelled", r.Status, r.Body, r.Header.Get("Idempotent-Replayed"), o.ID)
				}
				if r, _ := c.PlaceOrder(it.ID, "alice", "another-key"); r.ErrorCode() != "already_purchased" {
					t.Errorf("alice again with a new key: got %d %s, want 409 already_purchased", r.Status, r.Body)
				}
				buy(t, c, it.ID, "bob")
			})
		}
	})
}

// A lua-async order cannot be paid or cancelled while it is only queued:
// 409 order_pending, nothing changes; once a writer has written it, it can.
func TestPendingOrderCannotBeSettledYet(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.Writers = queue.NoWriters })
		it := c.CreateItem(t, 5, "lua-async")
		r, err := c.PlaceOrder(it.ID, "queued", "")
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("order: %v %d %s", err, r.Status, r.Body)
		}
		var o apptest.Order
		r.JSON(t, &o)
		for _, action := range []string{"pay", "cancel"} {
			r, err := c.SettleOrder(o.ID, action, map[string]string{"user_id": "queued"}, nil)
			if err != nil || r.Status != http.StatusConflict || r.ErrorCode() != "order_pending" {
				t.Errorf("%s a pending order: got %d %s %v, want 409 order_pending", action, r.Status, r.Body, err)
			}
		}
		// Writers in another instance on the same backend.
		_, w := apptest.Start(t, b)
		if got := w.AwaitOrder(t, o.ID, 20*time.Second); got.Status != "created" {
			t.Fatalf("order after the writers: %q, want created", got.Status)
		}
		r, err = c.SettleOrder(o.ID, "pay", map[string]string{"user_id": "queued"}, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("pay once written: got %d %s %v, want 200", r.Status, r.Body, err)
		}
		if got := c.AwaitOrder(t, o.ID, time.Second); got.Status != "paid" {
			t.Errorf("status after pay: %q, want paid", got.Status)
		}
	})
}
