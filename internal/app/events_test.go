package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

type feedEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	OrderID string `json:"order_id"`
	ItemID  int64  `json:"item_id"`
	UserID  string `json:"user_id"`
	Status  string `json:"status"`
	Cursor  int64  `json:"cursor"`
}

type feedPage struct {
	Events    []feedEvent `json:"events"`
	NextAfter int64       `json:"next_after"`
}

// readFeed pages through the admin feed from after, limit events a page,
// until a page comes back empty.
func readFeed(t *testing.T, c *apptest.Client, after int64, limit int) ([]feedEvent, int64) {
	t.Helper()
	var all []feedEvent
	for {
		r, err := c.Do("GET", fmt.Sprintf("/api/v1/admin/events?after=%d&limit=%d", after, limit), nil, true, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("feed after %d: %d %s %v", after, r.Status, r.Body, err)
		}
		var p feedPage
		r.JSON(t, &p)
		if len(p.Events) > limit {
			t.Fatalf("feed page of %d events, limit %d", len(p.Events), limit)
		}
		for _, e := range p.Events {
			if e.Cursor <= after {
				t.Fatalf("event %+v at or before the cursor %d it was asked after", e, after)
			}
			after = e.Cursor
		}
		if p.NextAfter != after {
			t.Fatalf("next_after %d, want %d (the last cursor)", p.NextAfter, after)
		}
		all = append(all, p.Events...)
		if len(p.Events) == 0 {
			return all, after
		}
	}
}

// The admin feed lists every order change once, in delivery order, paged
// by cursor, with no NATS configured: each order answered 201 has one
// created event, a cancelled one its cancelled event after it; bad
// cursors and limits are a 400, and no token a 401.
func TestAdminEventFeed(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		it := c.CreateItem(t, 5, "lua")
		ids := map[string]string{}
		for i := 0; i < 7; i++ {
			user := fmt.Sprintf("feed-%d", i)
			r, err := c.PlaceOrder(it.ID, user, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == http.StatusCreated {
				var o apptest.Order
				r.JSON(t, &o)
				ids[o.ID] = user
			}
		}
		if len(ids) != 5 {
			t.Fatalf("%d orders, want 5", len(ids))
		}
		var cancelled string
		for id, user := range ids {
			cancelled = id
			if r, _ := c.SettleOrder(id, "cancel", map[string]string{"user_id": user}, nil); r.Status != http.StatusOK {
				t.Fatalf("cancel: %d %s", r.Status, r.Body)
			}
			break
		}
		// The relay marks the events (no NATS: it only marks); wait for
		// all six, paging two at a time.
		var evs []feedEvent
		deadline := time.Now().Add(30 * time.Second)
		for {
			evs, _ = readFeed(t, c, 0, 2)
			if len(evs) >= 6 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		created, seen := map[string]int{}, map[string]bool{}
		var cancelAt, createdAt int64
		for _, e := range evs {
			if seen[e.ID] {
				t.Errorf("event %s listed twice", e.ID)
			}
			seen[e.ID] = true
			if e.ItemID != it.ID || ids[e.OrderID] != e.UserID {
				t.Errorf("event %+v: not one of the item's orders", e)
			}
			switch e.Type {
			case "created":
				created[e.OrderID]++
				if e.OrderID == cancelled {
					createdAt = e.Cursor
				}
			case "cancelled":
				if e.OrderID != cancelled || e.Status != "cancelled" {
					t.Errorf("cancelled event %+v, want order %s cancelled", e, cancelled)
				}
				cancelAt = e.Cursor
			default:
				t.Errorf("event %+v: unexpected type", e)
			}
		}
		for id := range ids {
			if created[id] != 1 {
				t.Errorf("order %s: %d created events, want 1", id, created[id])
			}
		}
		if cancelAt == 0 || cancelAt < createdAt {
			t.Errorf("the cancelled event (cursor %d) must follow its order's created event (%d)", cancelAt, createdAt)
		}
		// From the last cursor: nothing new, and next_after stays.
		if more, last := readFeed(t, c, cancelAt, 100); len(more) != 0 || last != cancelAt {
			t.Errorf("after the last cursor: %d events, next_after %d; want none, %d", len(more), last, cancelAt)
		}
		for _, q := range []string{"after=-1", "after=01", "after=x", "limit=0", "limit=1001", "after=1&after=2"} {
			r, _ := c.Do("GET", "/api/v1/admin/events?"+q, nil, true, nil)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Errorf("?%s: got %d %s, want 400 invalid_request", q, r.Status, r.Body)
			}
		}
		// The relay's figures: the six relayed (counted just after their
		// mark, so wait for it), none failed.
		var m string
		for deadline := time.Now().Add(30 * time.Second); ; {
			r, err := c.Do("GET", "/metrics", nil, true, nil)
			if err != nil || r.Status != http.StatusOK {
				t.Fatalf("metrics: %d %v", r.Status, err)
			}
			if m = string(r.Body); strings.Contains(m, "seckill_outbox_published_total 6\n") || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, want := range []string{"seckill_outbox_published_total 6\n", "seckill_outbox_publish_errors_total 0\n"} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics: no %q", want)
			}
		}
		if !strings.Contains(m, "seckill_outbox_backlog ") || !strings.Contains(m, "seckill_outbox_lag_seconds ") {
			t.Errorf("metrics: no outbox backlog or lag")
		}
		if r, _ := c.Do("GET", "/api/v1/admin/events", nil, false, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("no admin token: got %d %s, want 401", r.Status, r.Body)
		}
	})
}

// The console's order view: an order with the provider's payment and its
// events (created, then paid), and a second delivery of the payment shown
// once; an unknown order is a 404, and no token a 401.
func TestAdminOrderView(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.StripeWebhookSecret = stripeSecret })
		item := paymentItem(t, c)
		id := buyPriced(t, c, item, "viewer")
		body := webhookEvent("evt_view_1", id, priceCents, "usd")
		wantWebhook(t, postWebhook(t, c, body, stripeSecret), "paid", false)
		wantWebhook(t, postWebhook(t, c, body, stripeSecret), "paid", true)

		var v struct {
			Order struct {
				ID, Status string
			} `json:"order"`
			Payments []struct {
				EventID  string `json:"event_id"`
				Amount   int64  `json:"amount"`
				Currency string `json:"currency"`
				Outcome  string `json:"outcome"`
			} `json:"payments"`
			Events []feedEvent `json:"events"`
		}
		c.Must(t, "GET", "/api/v1/admin/orders/"+id, nil, true, nil).JSON(t, &v)
		if v.Order.ID != id || v.Order.Status != "paid" {
			t.Errorf("order %+v, want %s paid", v.Order, id)
		}
		if len(v.Payments) != 1 || v.Payments[0].EventID != "evt_view_1" || v.Payments[0].Amount != priceCents ||
			v.Payments[0].Currency != "usd" || v.Payments[0].Outcome != "paid" {
			t.Errorf("payments %+v, want evt_view_1 once, %d usd, paid", v.Payments, priceCents)
		}
		var types []string
		for _, e := range v.Events {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != "created,paid" {
			t.Errorf("events %v, want created,paid", types)
		}
		if r, _ := c.Do("GET", "/api/v1/admin/orders/01a23bd8-0000-7000-8000-000000000000", nil, true, nil); r.Status != http.StatusNotFound {
			t.Errorf("unknown order: got %d %s, want 404", r.Status, r.Body)
		}
		if r, _ := c.Do("GET", "/api/v1/admin/orders/"+id, nil, false, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("no token: got %d %s, want 401", r.Status, r.Body)
		}
	})
}
