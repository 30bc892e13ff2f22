package handler

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// answeringShop answers every read a GET route makes.
func answeringShop() *fakeShop {
	now := time.Now().UTC()
	it := &stock.Item{ID: 1, Name: "widget", Stock: 10, Sold: 2, Strategy: stock.StrategyLuaAsync, Buckets: 1, CreatedAt: now, UpdatedAt: now}
	view := &stock.ItemView{ID: 1, Name: "widget", Remaining: 8}
	order := &stock.Order{ID: "0190a0c2-0000-7000-8000-000000000001", ItemID: 1, UserID: "alice", Status: stock.StatusCreated, CreatedAt: now, UpdatedAt: now}
	return &fakeShop{
		item:     func(context.Context, int64) (*stock.Item, error) { return it, nil },
		itemView: func(context.Context, int64) (*stock.ItemView, error) { return view, nil },
		order:    func(context.Context, string) (*stock.Order, error) { return order, nil },
		listItems: func(context.Context, stock.ItemFilter) (*stock.ItemPage, error) {
			return &stock.ItemPage{Items: []*stock.Item{it}}, nil
		},
		deadLetters: func(context.Context, int64, int64) ([]stock.DeadLetter, error) { return nil, nil },
		asyncStats:  func(context.Context, int64) (stock.AsyncStats, error) { return stock.AsyncStats{Queued: 1}, nil },
		ready:       func(context.Context) error { return nil },
		backlog:     func(context.Context) (stock.AsyncStats, error) { return stock.AsyncStats{}, nil },
	}
}

// concretePath fills a route's parameters with values that exist in
// answeringShop, and keeps the pprof captures short.
func concretePath(route string) string {
	p := route
	switch {
	case strings.HasPrefix(p, "/api/v1/orders/"):
		p = strings.Replace(p, ":id", "0190a0c2-0000-7000-8000-000000000001", 1)
	case strings.HasSuffix(p, "/profile"), strings.HasSuffix(p, "/trace"):
		p += "?seconds=1"
	case strings.HasSuffix(p, "/queue/challenge"):
		p += "?user_id=alice"
	}
	r := strings.NewReplacer(":id", "1", ":file", "app.css", ":profile", "heap", ":ticket", "t")
	return r.Replace(p)
}

// rawHead sends a HEAD on a connection of its own and returns the answer
// and every byte the server sent after the answer's header, which must be
// none.
func rawHead(t *testing.T, base, path string) (*http.Response, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Generous: a HEAD the service does not end waits for the request
	// timeout or the stream's minute.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "HEAD " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + testAdminToken + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatalf("HEAD %s: %v", path, err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("HEAD %s: the connection did not end: %v (%d bytes after the header)", path, err, len(rest))
	}
	return resp, rest
}

// headersCompared are the headers a HEAD must send as its GET does.
var headersCompared = []string{"Content-Type", "Content-Length", "Cache-Control", "ETag", "Last-Modified",
	"Content-Security-Policy", "X-Content-Type-Options", "WWW-Authenticate", "Allow", "X-Accel-Buffering"}

// TestHeadWhereverGet walks the route table of each listener: every GET
// route has a HEAD route, and a HEAD gets the GET's status and headers and
// no body (read off the wire), the live stream included, which ends at once.
func TestHeadWhereverGet(t *testing.T) {
	t.Parallel()
	issue, check := powConfig(room.GeneratePassKey())
	for _, separate := range []bool{false, true} {
		// A minute for a request: a HEAD stream that did not end would
		// outlast rawHead's deadline.
		h := newTestHandler(t, answeringShop(), Config{Metrics: metrics.New(nil), Pprof: true, SeparateAdmin: separate,
			RequestTimeout: time.Minute, Rooms: answeringRooms{}, RoomChallenge: issue, RoomPoW: check, Events: answeringFeed{}})
		engines := map[string]*gin.Engine{"one listener": h.engine}
		if separate {
			engines = map[string]*gin.Engine{"public": h.engine, "admin": h.admin}
		}
		for name, e := range engines {
			srv := httptest.NewServer(e)
			methods := map[string]map[string]bool{}
			for _, r := range e.Routes() {
				if methods[r.Path] == nil {
					methods[r.Path] = map[string]bool{}
				}
				methods[r.Path][r.Method] = true
			}
			for path, m := range methods {
				if m[http.MethodGet] != m[http.MethodHead] {
					t.Errorf("%s: %s: GET %v, HEAD %v; want both or neither", name, path, m[http.MethodGet], m[http.MethodHead])
				}
				if !m[http.MethodGet] {
					continue
				}
				t.Run(name+" "+path, func(t *testing.T) {
					p := concretePath(path)
					req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
					req.Header.Set("Authorization", "Bearer "+testAdminToken)
					get, err := srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(path, "/profile") || strings.HasSuffix(path, "/trace") {
						// Read to the end: the capture stops when its handler
						// returns, and a HEAD sent while it still runs is a
						// 500 ("already enabled").
						if _, err := io.Copy(io.Discard, get.Body); err != nil {
							t.Fatal(err)
						}
					}
					get.Body.Close() // a stream's header is all that is compared
					head, rest := rawHead(t, srv.URL, p)
					if head.StatusCode != get.StatusCode || get.StatusCode >= 300 {
						t.Errorf("HEAD %s: got %d, GET got %d; want the same 2xx", p, head.StatusCode, get.StatusCode)
					}
					// The metrics and profiles change between two requests,
					// and their lengths with them.
					dynamic := path == "/metrics" || strings.HasPrefix(path, "/debug/pprof/")
					for _, k := range headersCompared {
						if k == "Content-Length" && dynamic {
							continue
						}
						if g, hd := get.Header.Get(k), head.Header.Get(k); g != hd {
							t.Errorf("HEAD %s: %s %q, GET's %q", p, k, hd, g)
						}
					}
					if len(rest) > 0 {
						t.Errorf("HEAD %s: %d bytes of body sent: %.80q", p, len(rest), rest)
					}
				})
			}
			srv.Close()
			if name != "admin" {
				for _, want := range []string{"/", "/healthz", "/readyz", "/openapi.yaml", "/sale/:id", "/api/v1/items/:id"} {
					if !methods[want][http.MethodHead] {
						t.Errorf("%s: no HEAD %s", name, want)
					}
				}
			}
			if name == "admin" || !separate {
				for _, want := range []string{"/", "/admin/", "/metrics", "/healthz", "/api/v1/admin/items/:id/live"} {
					if !methods[want][http.MethodHead] {
						t.Errorf("%s: no HEAD %s", name, want)
					}
				}
			}
		}
	}
}

// TestHeadOfPostOnlyRoute: HEAD on a route that has no GET is a 405 whose
// Allow names the methods it has.
func TestHeadOfPostOnlyRoute(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newTestHandler(t, &fakeShop{}, Config{}))
	defer srv.Close()
	head, rest := rawHead(t, srv.URL, "/api/v1/items/1/orders")
	if head.StatusCode != http.StatusMethodNotAllowed || head.Header.Get("Allow") != "POST" || len(rest) > 0 {
		t.Errorf("HEAD on the orders route: got %d, Allow %q, %d body bytes; want 405, Allow POST, none",
			head.StatusCode, head.Header.Get("Allow"), len(rest))
	}
}

// TestIndexPage: / is a page that says where the console, the sale pages
// and the API document are, on each listener.
func TestIndexPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		separate   bool
		admin      bool
		want, nots []string
	}{
		{"one listener", false, false, []string{`href="/admin/"`, "/sale/{item id}", `href="/openapi.yaml"`, `href="/readyz"`}, nil},
		{"public listener", true, false, []string{"/sale/{item id}", `href="/openapi.yaml"`, "admin listener"}, []string{`href="/admin/"`}},
		{"admin listener", true, true, []string{`href="/admin/"`, "public listener"}, []string{`href="/openapi.yaml"`, `href="/readyz"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler(t, &fakeShop{}, Config{SeparateAdmin: tc.separate})
			var srv http.Handler = h
			if tc.admin {
				srv = h.Admin()
			}
			a := call(srv, "GET", "/", "", nil)
			body := string(a.body)
			if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || a.header.Get("Content-Security-Policy") == "" {
				t.Fatalf("GET /: got %d %q CSP %q, want 200 text/html with a CSP", a.status, a.header.Get("Content-Type"), a.header.Get("Content-Security-Policy"))
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET / does not hold %q:\n%s", w, body)
				}
			}
			for _, n := range tc.nots {
				if strings.Contains(body, n) {
					t.Errorf("GET / holds %q, which this listener does not serve", n)
				}
			}
		})
	}
}
