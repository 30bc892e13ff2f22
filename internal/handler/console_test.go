package handler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

var adminHeader = map[string]string{"Authorization": "Bearer " + testAdminToken}

// TestListItemsQuery: the query reaches the shop as a filter; a bad one is
// a 400 that names the parameter and never reaches it.
func TestListItemsQuery(t *testing.T) {
	t.Parallel()
	cases := []struct {
		query string
		want  stock.ItemFilter // zero: refused
		param string
	}{
		{"", stock.ItemFilter{Limit: 50}, ""},
		{"?status=on_sale&limit=10&before=99", stock.ItemFilter{Status: "on_sale", Limit: 10, Before: 99}, ""},
		{"?limit=200", stock.ItemFilter{Limit: 200}, ""},
		{"?limit=0", stock.ItemFilter{}, "limit"},
		{"?limit=201", stock.ItemFilter{}, "limit"},
		{"?limit=", stock.ItemFilter{}, "limit"},
		{"?limit=1e2", stock.ItemFilter{}, "limit"},
		{"?before=0", stock.ItemFilter{}, "before"},
		{"?before=x", stock.ItemFilter{}, "before"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			var got *stock.ItemFilter
			shop := &fakeShop{listItems: func(_ context.Context, f stock.ItemFilter) (*stock.ItemPage, error) {
				got = &f
				return &stock.ItemPage{}, nil
			}}
			a := call(newTestHandler(t, shop, Config{}), "GET", "/api/v1/admin/items"+tc.query, "", adminHeader)
			if tc.param != "" {
				if a.status != 400 || a.code() != CodeInvalidRequest || !strings.Contains(string(a.body), tc.param) || got != nil {
					t.Errorf("got %d %s (shop called: %v), want 400 naming %s and no call", a.status, a.body, got != nil, tc.param)
				}
				return
			}
			if a.status != 200 || got == nil || *got != tc.want {
				t.Errorf("got %d %s with filter %+v, want 200 with %+v", a.status, a.body, got, tc.want)
			}
			if !strings.Contains(string(a.body), `"items":[]`) || !strings.Contains(string(a.body), `"next_before":null`) {
				t.Errorf("empty page: got %s", a.body)
			}
		})
	}
}

// TestTallyCountsOnlyWatchedItems: refusals are counted per item and code
// while a view watches the item, not before, and not for other items.
func TestTallyCountsOnlyWatchedItems(t *testing.T) {
	t.Parallel()
	shop := &fakeShop{placeOrder: func(_ context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
		if req.UserID == "again" {
			return nil, false, stock.ErrAlreadyPurchased
		}
		return nil, false, stock.ErrSoldOut
	}}
	h := newTestHandler(t, shop, Config{})
	order := func(item, user string) {
		t.Helper()
		if a := call(h, "POST", "/api/v1/items/"+item+"/orders", `{"user_id":"`+user+`"}`, nil); a.status != 409 {
			t.Fatalf("order: got %d %s, want 409", a.status, a.body)
		}
	}
	order("7", "before") // nobody watches yet
	stop := h.tally.watch(7)
	order("7", "x")
	order("7", "y")
	order("7", "again")
	order("8", "z") // not watched
	counts, since := h.tally.counts(7)
	if counts["sold_out"] != 2 || counts["already_purchased"] != 1 || len(counts) != 2 || time.Since(since) > time.Minute {
		t.Errorf("item 7: got %v since %v, want sold_out 2, already_purchased 1", counts, since)
	}
	if other, _ := h.tally.counts(8); len(other) != 0 {
		t.Errorf("item 8: got %v, want nothing counted", other)
	}
	stop()
	// The view's stream ended; its page reconnects: the counts go on.
	now := time.Now()
	h.tally.now = func() time.Time { return now }
	order("7", "between") // between the streams, still counted
	now = now.Add(liveTallyGrace - time.Second)
	stop = h.tally.watch(7)
	if again, s := h.tally.counts(7); again["sold_out"] != 3 || !s.Equal(since) {
		t.Errorf("the view reconnected: got %v since %v, want sold_out 3 since %v", again, s, since)
	}
	stop()
	// Nobody came back within the grace: forgotten, and the order path
	// is one atomic load again.
	now = now.Add(liveTallyGrace)
	order("7", "later")
	if after, _ := h.tally.counts(7); len(after) != 0 || h.tally.tracked.Load() != 0 {
		t.Errorf("a grace after the view closed: got %v and %d items tracked, want nothing", after, h.tally.tracked.Load())
	}
}

// TestLiveStreamThroughAnOutage: an outage when the view opens is a fast
// 503; one while it streams is a "problem" event, and the stream goes on.
func TestLiveStreamThroughAnOutage(t *testing.T) {
	t.Parallel()
	calls := 0
	item := &stock.Item{ID: 7, Name: "x", Stock: 5, Strategy: stock.StrategyLua}
	shop := &fakeShop{item: func(context.Context, int64) (*stock.Item, error) {
		calls++ // 1: the check on open; 2, 3, 4: the ticks
		if calls == 3 {
			return nil, fmt.Errorf("database: read item: %w", stock.ErrUnavailable)
		}
		return item, nil
	}}
	h := newTestHandler(t, shop, Config{RequestTimeout: 5 * time.Second})
	a := call(h, "GET", "/api/v1/admin/items/7/live", "", adminHeader)
	var events []string
	for _, line := range strings.Split(string(a.body), "\n") {
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
		}
	}
	if a.status != 200 || !strings.HasPrefix(strings.Join(events, ","), "stats,problem,stats") || !strings.Contains(string(a.body), `"code":"unavailable"`) {
		t.Errorf("got %d, events %v, body %s; want 200 and stats, problem (unavailable), stats", a.status, events, a.body)
	}
	// It ends itself 1.5s before the 5s request timeout, after the events
	// at 0 to 3s; cut by the timeout, it would have sent the one at 4s.
	if len(events) > 4 || !strings.HasPrefix(string(a.body), "retry: 1000\n\n") {
		t.Errorf("got %d events, want at most 4, after a retry of 1000ms", len(events))
	}

	down := &fakeShop{item: func(context.Context, int64) (*stock.Item, error) {
		return nil, fmt.Errorf("database: read item: %w", stock.ErrUnavailable)
	}}
	a = call(newTestHandler(t, down, Config{}), "GET", "/api/v1/admin/items/7/live", "", adminHeader)
	if a.status != 503 || a.code() != CodeUnavailable || a.header.Get("Retry-After") != "1" || a.header.Get("Content-Type") == "text/event-stream" {
		t.Errorf("opened during an outage: got %d %s, want a JSON 503 unavailable with Retry-After, no stream", a.status, a.body)
	}
}
