package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/web"
)

type listedItem struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	Stock  int64  `json:"stock"`
	Sold   int64  `json:"sold"`
}

type itemPage struct {
	Items      []listedItem `json:"items"`
	NextBefore *int64       `json:"next_before"`
}

// TestAdminItemList: the list pages newest first, filters by status, and
// refuses bad parameters with a 400 that names them.
func TestAdminItemList(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		var ids []int64
		for range 5 {
			ids = append([]int64{c.CreateItem(t, 1, "lua").ID}, ids...)
		}
		if r, err := c.PlaceOrder(ids[0], "alice", ""); err != nil || r.Status != http.StatusCreated {
			t.Fatalf("order: %d %s %v", r.Status, r.Body, err)
		}
		var got []int64
		path := "/api/v1/admin/items?limit=2"
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("more pages than items")
			}
			var p itemPage
			r := c.Must(t, "GET", path, nil, true, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("GET %s: got %d %s", path, r.Status, r.Body)
			}
			r.JSON(t, &p)
			for _, it := range p.Items {
				got = append(got, it.ID)
			}
			if p.NextBefore == nil {
				break
			}
			path = fmt.Sprintf("/api/v1/admin/items?limit=2&before=%d", *p.NextBefore)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("pages: got %v, want %v", got, ids)
		}
		var sold itemPage
		c.Must(t, "GET", "/api/v1/admin/items?status=sold_out", nil, true, nil).JSON(t, &sold)
		if len(sold.Items) != 1 || sold.Items[0].ID != ids[0] || sold.Items[0].Status != "sold_out" || sold.Items[0].Sold != 1 {
			t.Errorf("sold_out: got %+v, want item %d alone, sold 1", sold.Items, ids[0])
		}

		for _, q := range []string{"status=sold-out", "status=SOLD_OUT", "limit=0", "limit=201", "limit=x", "before=0", "before=-1", "before=1.5"} {
			r := c.Must(t, "GET", "/api/v1/admin/items?"+q, nil, true, nil)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Errorf("?%s: got %d %s, want 400 invalid_request", q, r.Status, r.Body)
			}
		}
		if r := c.Must(t, "GET", "/api/v1/admin/items", nil, false, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("without the token: got %d, want 401", r.Status)
		}
	})
}

// sseEvent is one event of a text/event-stream.
type sseEvent struct{ name, data string }

// readEvents reads events from an open stream until n have come or it ends.
func readEvents(t *testing.T, sc *bufio.Scanner, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var ev sseEvent
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" {
				out = append(out, ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

type liveStats struct {
	Item struct {
		ID        int64  `json:"id"`
		Sold      int64  `json:"sold"`
		Remaining int64  `json:"remaining"`
		Status    string `json:"status"`
	} `json:"item"`
	SoldPerSecond *float64         `json:"sold_per_second"`
	Rejections    map[string]int64 `json:"rejections"`
	Queue         *struct {
		Queued int64 `json:"queued"`
	} `json:"queue"`
}

func openLive(t *testing.T, c *apptest.Client, id int64) (*bufio.Scanner, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/admin/items/%d/live", c.Base, id), nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: got %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return bufio.NewScanner(resp.Body), func() { cancel(); resp.Body.Close() }
}

// TestLiveView: the stream sends the item's numbers each second, counts
// refused orders by code while it is open (and only then), shows the
// lua-async queue, and ends on its own before the request timeout.
func TestLiveView(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) {
			cfg.RequestTimeout, cfg.DBTimeout = 4*time.Second, 2*time.Second
			cfg.RateUser = ""
		})
		it := c.CreateItem(t, 2, "lua")
		// Refused before any view is open: not counted.
		c.PlaceOrder(it.ID, "alice", "")
		c.PlaceOrder(it.ID, "alice", "")

		sc, closeLive := openLive(t, c, it.ID)
		first := readEvents(t, sc, 1)
		if len(first) != 1 || first[0].name != "stats" {
			t.Fatalf("first event: got %+v, want stats", first)
		}
		var s liveStats
		if err := json.Unmarshal([]byte(first[0].data), &s); err != nil {
			t.Fatal(err)
		}
		if s.Item.ID != it.ID || s.Item.Sold != 1 || s.Item.Remaining != 1 || s.Item.Status != "on_sale" || s.SoldPerSecond != nil || len(s.Rejections) != 0 || s.Queue != nil {
			t.Errorf("first event: got %+v, want sold 1, remaining 1, on_sale, no rate, no rejections, no queue", s)
		}
		c.PlaceOrder(it.ID, "alice", "") // already_purchased
		c.PlaceOrder(it.ID, "bob", "")   // the last unit
		for _, u := range []string{"carol", "dave", "erin"} {
			c.PlaceOrder(it.ID, u, "") // sold_out
		}
		c.Must(t, "POST", fmt.Sprintf("/api/v1/items/%d/orders", it.ID), `{"user_id":""}`, false, nil) // invalid_request
		evs := readEvents(t, sc, 1)
		if len(evs) != 1 {
			t.Fatal("no second event")
		}
		s = liveStats{}
		if err := json.Unmarshal([]byte(evs[0].data), &s); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"already_purchased": 1, "sold_out": 3, "invalid_request": 1}
		if s.Item.Sold != 2 || s.Item.Status != "sold_out" || s.SoldPerSecond == nil || *s.SoldPerSecond <= 0 || !mapsEqual(s.Rejections, want) {
			t.Errorf("second event: got sold %d %s rate %v rejections %v, want 2 sold_out, a rate above 0, %v",
				s.Item.Sold, s.Item.Status, s.SoldPerSecond, s.Rejections, want)
		}
		// The stream ends itself 1.5s before the 4s request timeout: after
		// the events at 0, 1 and 2s. Cut by the timeout instead, it would
		// also have sent the one at 3s.
		if rest := readEvents(t, sc, 100); len(rest) > 1 {
			t.Errorf("stream end: %d events after the second, want at most 1 (3 in all)", len(rest))
		}
		closeLive()

		// The page reconnects after the stream's end: the counts go on
		// (they are dropped a minute after the last view closed), with
		// the refusal in between counted too.
		c.PlaceOrder(it.ID, "frank", "") // sold_out
		sc, closeLive = openLive(t, c, it.ID)
		defer closeLive()
		evs = readEvents(t, sc, 1)
		s = liveStats{} // Unmarshal would add to the old map
		want["sold_out"]++
		if len(evs) != 1 || json.Unmarshal([]byte(evs[0].data), &s) != nil || !mapsEqual(s.Rejections, want) {
			t.Errorf("the view reconnected: got %+v, want rejections %v", evs, want)
		}

		async := c.CreateItem(t, 3, "lua-async")
		sc2, closeAsync := openLive(t, c, async.ID)
		defer closeAsync()
		evs = readEvents(t, sc2, 1)
		if len(evs) != 1 || json.Unmarshal([]byte(evs[0].data), &s) != nil || s.Queue == nil {
			t.Errorf("lua-async view: got %+v, want a queue", evs)
		}

		for path, want := range map[string]int{"/api/v1/admin/items/999999/live": 404, "/api/v1/admin/items/01/live": 400} {
			if r := c.Must(t, "GET", path, nil, true, nil); r.Status != want || r.ErrorCode() == "" {
				t.Errorf("GET %s: got %d %s, want %d with a JSON error", path, r.Status, r.Body, want)
			}
		}
		if r := c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d/live", it.ID), nil, false, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("live without the token: got %d, want 401", r.Status)
		}
	})
}

// inline finds a script without src, a style element or attribute, and an
// event handler attribute.
var inline = regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|\sstyle=|\son[a-z]+=`)

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestConsolePages: the pages and assets carry the Content-Security-Policy;
// the console is on the admin listener when there is one, the sale page on
// the public one; the sale page asks for a token in JWT mode.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	b := testenv.Embedded(t)
	a, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.AdminAddr = "127.0.0.1:0" })
	admin := httptest.NewServer(a.AdminHandler())
	t.Cleanup(admin.Close)
	ac := apptest.NewClient(admin.URL, apptest.Token)

	for _, tc := range []struct {
		name   string
		c      *apptest.Client
		path   string
		status int
		ctype  string
	}{
		{"console on admin", ac, "/admin/", 200, "text/html; charset=utf-8"},
		{"console not public", c, "/admin/", 404, "application/json; charset=utf-8"},
		{"admin API not public", c, "/api/v1/admin/items", 404, "application/json; charset=utf-8"},
		{"sale page public", c, "/sale/1", 200, "text/html; charset=utf-8"},
		{"sale page not on admin", ac, "/sale/1", 404, "application/json; charset=utf-8"},
		{"sale page bad id", c, "/sale/01", 400, "application/json; charset=utf-8"},
		{"script public", c, "/assets/sale.js", 200, "text/javascript; charset=utf-8"},
		{"script on admin", ac, "/assets/console.js", 200, "text/javascript; charset=utf-8"},
		{"style", c, "/assets/app.css", 200, "text/css; charset=utf-8"},
		{"no such asset", c, "/assets/nope.js", 404, "application/json; charset=utf-8"},
		{"no traversal", c, "/assets/..%2fconsole.html", 404, "application/json; charset=utf-8"},
	} {
		r := tc.c.Must(t, "GET", tc.path, nil, false, nil)
		if r.Status != tc.status || r.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s: GET %s: got %d %q, want %d %q", tc.name, tc.path, r.Status, r.Header.Get("Content-Type"), tc.status, tc.ctype)
		}
		if tc.status == 200 {
			if got := r.Header.Get("Content-Security-Policy"); got != web.CSP || !strings.Contains(got, "default-src 'self'") || strings.Contains(got, "unsafe") {
				t.Errorf("%s: CSP %q, want %q", tc.name, got, web.CSP)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: no X-Content-Type-Options: nosniff", tc.name)
			}
		}
	}
	if r := ac.Must(t, "GET", "/api/v1/admin/items", nil, true, nil); r.Status != http.StatusOK {
		t.Errorf("admin API on the admin listener: got %d", r.Status)
	}

	_, jc := apptest.Start(t, b, func(cfg *app.Config) { cfg.UserJWTSecret = jwtSecret })

	// No inline script, style or event handler in either page.
	console := string(ac.Must(t, "GET", "/admin/", nil, false, nil).Body)
	sale := string(c.Must(t, "GET", "/sale/1", nil, false, nil).Body)
	for name, body := range map[string]string{"console": console, "sale page": sale} {
		if inline.MatchString(body) {
			t.Errorf("%s has inline script or style: %q", name, inline.FindString(body))
		}
	}
	if !strings.Contains(sale, `data-auth="user-id"`) {
		t.Errorf("sale page: want data-auth=user-id")
	}
	if !strings.Contains(console, `data-sale-pages="elsewhere"`) {
		t.Errorf("console on the admin listener: want data-sale-pages=elsewhere (no links to the sale pages)")
	}
	if one := string(jc.Must(t, "GET", "/admin/", nil, false, nil).Body); !strings.Contains(one, `data-sale-pages="here"`) {
		t.Errorf("console on the one listener: want data-sale-pages=here")
	}
	if jwtSale := string(jc.Must(t, "GET", "/sale/1", nil, false, nil).Body); !strings.Contains(jwtSale, `data-auth="user-token"`) {
		t.Errorf("sale page in JWT mode: want data-auth=user-token")
	}
}
