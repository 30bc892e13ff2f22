package handler

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Many live views of one item share its reads: the item costs at most two
// reads a second (liveShareAge) however many views watch it, instead of
// one per view per second. Each view still gets a new event every tick,
// with its own sold-per-second.
func TestLiveViewsShareTheirReads(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	var sold atomic.Int64
	shop := &fakeShop{item: func(context.Context, int64) (*stock.Item, error) {
		reads.Add(1)
		return &stock.Item{ID: 7, Name: "x", Stock: 1000, Sold: sold.Add(10), Strategy: stock.StrategyLua}, nil
	}}
	// Each view ends 1.5s before the 4s request timeout: events at 0, 1
	// and 2s.
	h := newTestHandler(t, shop, Config{RequestTimeout: 4 * time.Second})
	const views = 12
	bodies := make([]answer, views)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range views {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = call(h, "GET", "/api/v1/admin/items/7/live", "", adminHeader)
		}()
	}
	wg.Wait()
	streamed := time.Since(start)
	for i, a := range bodies {
		var stats []liveJSON
		for _, line := range strings.Split(string(a.body), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var ev liveJSON
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("view %d: event %q: %v", i, data, err)
				}
				stats = append(stats, ev)
			}
		}
		if a.status != http.StatusOK || len(stats) < 2 {
			t.Fatalf("view %d: got %d with %d events, want 200 and at least 2", i, a.status, len(stats))
		}
		for j, ev := range stats[1:] {
			if ev.SoldPerSecond == nil || !ev.At.After(stats[j].At) {
				t.Errorf("view %d event %d: sold_per_second %v at %v after %v; want a rate, and a newer event each tick", i, j+1, ev.SoldPerSecond, ev.At, stats[j].At)
			}
		}
	}
	// One read per view to open it (the id's check), then the shared
	// reads: at most one per liveShareAge of streaming, plus one.
	shared := reads.Load() - views
	if limit := int64(streamed/liveShareAge) + 1; shared > limit {
		t.Errorf("item reads of %d views over %v: %d besides the opens, want at most %d (one per %v)", views, streamed.Round(time.Millisecond), shared, limit, liveShareAge)
	}
}

// Past maxStreams open views, a new one is refused with a JSON 429 and
// Retry-After; once a view closes, a new one opens.
func TestLiveViewsCapped(t *testing.T) {
	t.Parallel()
	shop := &fakeShop{item: func(context.Context, int64) (*stock.Item, error) {
		return &stock.Item{ID: 7, Name: "x", Stock: 5, Strategy: stock.StrategyLua}, nil
	}}
	h := newTestHandler(t, shop, Config{RequestTimeout: 30 * time.Second})
	h.tally.maxStreams = 2
	srv := httptest.NewServer(h)
	defer srv.Close()

	open := func() (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/admin/items/7/live", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range adminHeader {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return resp, cancel
	}
	awaitEvent := func(resp *http.Response) {
		t.Helper()
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before its first event: %v", err)
			}
			if strings.HasPrefix(line, "event: stats") {
				return
			}
		}
	}
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	var first *http.Response
	for i := range 2 {
		resp, cancel := open()
		cancels = append(cancels, cancel)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("view %d of 2: got %d, want 200", i, resp.StatusCode)
		}
		awaitEvent(resp)
		if first == nil {
			first = resp
		} else {
			defer resp.Body.Close()
		}
	}
	resp, cancel := open()
	var e errorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != CodeRateLimited || resp.Header.Get("Retry-After") != "5" {
		t.Errorf("third view: got %d %+v Retry-After %q, want 429 rate_limited with Retry-After 5", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}

	// A view closes: its place is free again.
	cancels[0]()
	first.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.tally.streams.Load() >= 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the closed view is still counted: %d open", h.tally.streams.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, cancel = open()
	cancels = append(cancels, cancel)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a view after one closed: got %d, want 200", resp.StatusCode)
	}
}
