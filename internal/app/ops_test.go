package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// lockedBuffer collects log output written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines decodes the JSON log lines.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(l.b.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRequestIDHeader(t *testing.T) {
	t.Parallel()
	_, c := apptest.Start(t, testenv.Embedded(t))
	cases := []struct {
		name, incoming string
		keep           bool
	}{
		{"none", "", false},
		{"sane one kept", "req-1.2_3:abc", true},
		{"too long replaced", strings.Repeat("a", 65), false},
		{"bad characters replaced", "a b\"c", false},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h map[string]string
			if tc.incoming != "" {
				h = map[string]string{"X-Request-Id": tc.incoming}
			}
			r := c.Must(t, "GET", "/healthz", nil, false, h)
			got := r.Header.Get("X-Request-Id")
			switch {
			case tc.keep && got != tc.incoming:
				t.Errorf("X-Request-Id: got %q, want the incoming %q", got, tc.incoming)
			case !tc.keep && (got == "" || got == tc.incoming):
				t.Errorf("X-Request-Id: got %q, want a generated id", got)
			}
			if seen[got] {
				t.Errorf("X-Request-Id %q was given twice", got)
			}
			seen[got] = true
		})
	}
}

// TestAuditLog: every admin change logs who, what, before and after, with
// the request's id.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	_, c := apptest.StartLogged(t, testenv.Embedded(t), log)
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "audited", "stock": 3}, true,
		map[string]string{"X-Request-Id": "audit-create-1"})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: got %d %s, want 201", r.Status, r.Body)
	}
	var it apptest.Item
	r.JSON(t, &it)
	r = c.Must(t, "PUT", "/api/v1/admin/items/"+strconv.FormatInt(it.ID, 10)+"/stock", map[string]any{"stock": 7}, true,
		map[string]string{"X-Request-Id": "audit-stock-1"})
	if r.Status != http.StatusOK {
		t.Fatalf("set stock: got %d %s, want 200", r.Status, r.Body)
	}
	// A refused change is not audited as a change.
	c.Must(t, "PUT", "/api/v1/admin/items/"+strconv.FormatInt(it.ID, 10)+"/stock", map[string]any{"stock": -1}, true, nil)

	var audits []map[string]any
	for _, l := range buf.lines(t) {
		if l["msg"] == "audit" {
			audits = append(audits, l)
		}
	}
	if len(audits) != 2 {
		t.Fatalf("got %d audit lines, want 2: %v", len(audits), audits)
	}
	create, set := audits[0], audits[1]
	if create["action"] != "create_item" || create["request_id"] != "audit-create-1" || !strings.HasPrefix(create["who"].(string), "admin 127.0.0.1") {
		t.Errorf("create audit line: got %v, want action create_item, request_id audit-create-1, who admin 127.0.0.1", create)
	}
	if after, _ := create["after"].(map[string]any); after == nil || after["stock"] != 3.0 || after["name"] != "audited" {
		t.Errorf("create audit after: got %v, want the new item with stock 3", create["after"])
	}
	if set["action"] != "set_stock" || set["request_id"] != "audit-stock-1" || set["item"] != float64(it.ID) {
		t.Errorf("set_stock audit line: got %v, want action set_stock, request_id audit-stock-1, item %d", set, it.ID)
	}
	before, _ := set["before"].(map[string]any)
	after, _ := set["after"].(map[string]any)
	if before["stock"] != 3.0 || after["stock"] != 7.0 {
		t.Errorf("set_stock audit: got before %v after %v, want stock 3 then 7", before, after)
	}
}

// TestRateLimits: a user hammering one item gets one order and 429s beyond
// the burst; other users are untouched. The per-address limit counts every
// user from one address.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		t.Run("user", func(t *testing.T) {
			// Burst 3, then one a minute: nothing refills during the test.
			_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.RateUser = "1/m:3" })
			it := c.CreateItem(t, 10, "lua")
			const n = 20
			statuses := make([]apptest.Response, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A key of its own each: keyed requests always pass the
					// limiter (without one, a user this process has just
					// refused is refused again from memory, before the
					// limiter, whenever that refusal came first; see
					// "keyless" below).
					r, err := c.PlaceOrder(it.ID, "hammer", fmt.Sprintf("hammer-%d", i))
					if err != nil {
						t.Error(err)
					}
					statuses[i] = r
				}()
			}
			wg.Wait()
			count := map[int]int{}
			for _, r := range statuses {
				count[r.Status]++
				if r.Status == http.StatusTooManyRequests {
					if r.ErrorCode() != "rate_limited" {
						t.Errorf("429 code: got %q, want rate_limited", r.ErrorCode())
					}
					if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
						t.Errorf("429 Retry-After: got %q, want whole seconds >= 1", r.Header.Get("Retry-After"))
					}
				}
			}
			if count[201] != 1 || count[429] != n-3 || count[409] != 2 {
				t.Errorf("statuses of %d attempts by one user: got %v, want 1x201, 2x409, %dx429", n, count, n-3)
			}
			if got := c.AdminItem(t, it.ID).Sold; got != 1 {
				t.Errorf("sold: got %d, want 1", got)
			}
			if r, _ := c.PlaceOrder(it.ID, "bystander", ""); r.Status != http.StatusCreated {
				t.Errorf("another user: got %d %s, want 201", r.Status, r.Body)
			}
		})
		t.Run("keyless", func(t *testing.T) {
			// Without keys the split between 409 and 429 depends on when
			// the first refusal is remembered; what never moves: one
			// order, every other attempt refused, the burst's refusals
			// among them, and nothing else sold.
			_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.RateUser = "1/m:3" })
			it := c.CreateItem(t, 10, "lua")
			const n = 20
			statuses := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := c.PlaceOrder(it.ID, "keyless-hammer", "")
					if err != nil {
						t.Error(err)
					}
					statuses[i] = r.Status
				}()
			}
			wg.Wait()
			count := map[int]int{}
			for _, s := range statuses {
				count[s]++
			}
			if count[201] != 1 || count[409] < 2 || count[409]+count[429] != n-1 {
				t.Errorf("statuses of %d keyless attempts by one user: got %v, want 1x201 and the rest 409 (at least 2) or 429", n, count)
			}
			if got := c.AdminItem(t, it.ID).Sold; got != 1 {
				t.Errorf("sold: got %d, want 1", got)
			}
		})
		t.Run("ip", func(t *testing.T) {
			_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.RateUser = "0"; cfg.RateIP = "1/m:2" })
			it := c.CreateItem(t, 10, "lua")
			for i, want := range []int{201, 201, 429} {
				r, _ := c.PlaceOrder(it.ID, "ip-user-"+strconv.Itoa(i), "")
				if r.Status != want {
					t.Errorf("order %d from one address: got %d %s, want %d", i, r.Status, r.Body, want)
				}
			}
		})
	})
}

const jwtSecret = "jwt-secret-for-tests-0123456789abcdef"

func token(t *testing.T, method jwt.SigningMethod, secret string, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + s
}

// TestUserTokens: with a JWT secret the user comes from the token, the body's
// user_id is ignored, and an order is visible to its owner only.
func TestUserTokens(t *testing.T) {
	t.Parallel()
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.UserJWTSecret = jwtSecret })
	it := c.CreateItem(t, 5, "lua")
	exp := time.Now().Add(time.Hour).Unix()
	alice := token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "alice", "exp": exp})
	bob := token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "bob", "exp": exp})
	path := "/api/v1/items/" + strconv.FormatInt(it.ID, 10) + "/orders"

	r := c.Must(t, "POST", path, map[string]any{"user_id": "mallory"}, false, map[string]string{"Authorization": alice})
	if r.Status != http.StatusCreated {
		t.Fatalf("order with alice's token: got %d %s, want 201", r.Status, r.Body)
	}
	var o apptest.Order
	r.JSON(t, &o)
	if o.UserID != "alice" {
		t.Errorf("order user: got %q, want alice (from the token, not the body)", o.UserID)
	}
	if r := c.Must(t, "POST", path, "{}", false, map[string]string{"Authorization": bob}); r.Status != http.StatusCreated {
		t.Errorf("order with bob's token and no user_id: got %d %s, want 201", r.Status, r.Body)
	}

	bad := []struct{ name, auth string }{
		{"missing", ""},
		{"expired", token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Minute).Unix()})},
		{"no exp", token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"sub": "alice"})},
		{"wrong secret", token(t, jwt.SigningMethodHS256, jwtSecret+"x", jwt.MapClaims{"sub": "alice", "exp": exp})},
		{"HS384", token(t, jwt.SigningMethodHS384, jwtSecret, jwt.MapClaims{"sub": "alice", "exp": exp})},
		{"alg none", "Bearer " + func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "alice", "exp": exp}).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}()},
		{"no sub", token(t, jwt.SigningMethodHS256, jwtSecret, jwt.MapClaims{"exp": exp})},
		{"garbage", "Bearer not.a.token"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var h map[string]string
			if tc.auth != "" {
				h = map[string]string{"Authorization": tc.auth}
			}
			r := c.Must(t, "POST", path, map[string]any{"user_id": "carol"}, false, h)
			if r.Status != http.StatusUnauthorized || r.ErrorCode() != "unauthorized" {
				t.Errorf("order: got %d %s, want 401 unauthorized", r.Status, r.Body)
			}
			r = c.Must(t, "GET", "/api/v1/orders/"+o.ID, nil, false, h)
			if r.Status != http.StatusUnauthorized {
				t.Errorf("read order: got %d %s, want 401", r.Status, r.Body)
			}
		})
	}
	if got := c.AdminItem(t, it.ID).Sold; got != 2 {
		t.Errorf("sold: got %d, want 2 (refused tokens sell nothing)", got)
	}

	if r := c.Must(t, "GET", "/api/v1/orders/"+o.ID, nil, false, map[string]string{"Authorization": alice}); r.Status != http.StatusOK {
		t.Errorf("owner reads her order: got %d %s, want 200", r.Status, r.Body)
	}
	if r := c.Must(t, "GET", "/api/v1/orders/"+o.ID, nil, false, map[string]string{"Authorization": bob}); r.Status != http.StatusNotFound || r.ErrorCode() != "not_found" {
		t.Errorf("another user reads alice's order: got %d %s, want 404 not_found", r.Status, r.Body)
	}
}

// TestAdminListener: with an admin address the admin API, /metrics and
// pprof answer there only, and Serve shuts both listeners down.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	b := testenv.Embedded(t)
	a, err := app.New(context.Background(), app.Config{SQLitePath: b.SQLitePath, AdminToken: apptest.Token,
		AdminAddr: "127.0.0.1:0", Pprof: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	pub, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, pub, adm) }()
	pc := apptest.NewClient("http://"+pub.Addr().String(), apptest.Token)
	ac := apptest.NewClient("http://"+adm.Addr().String(), apptest.Token)

	checks := []struct {
		name   string
		c      *apptest.Client
		path   string
		admin  bool
		status int
	}{
		{"public API on public", pc, "/healthz", false, 200},
		{"admin API not on public", pc, "/api/v1/admin/items/1", true, 404},
		{"metrics not on public", pc, "/metrics", false, 404},
		{"pprof not on public", pc, "/debug/pprof/", true, 404},
		{"admin API on admin", ac, "/api/v1/admin/items/1", true, 404}, // routed: no such item
		{"admin API needs the token", ac, "/api/v1/admin/items/1", false, 401},
		{"metrics on admin", ac, "/metrics", false, 200},
		{"pprof on admin", ac, "/debug/pprof/", true, 200},
		{"pprof profile on admin", ac, "/debug/pprof/heap", true, 200},
		{"pprof needs the token", ac, "/debug/pprof/", false, 401},
		{"orders not on admin", ac, "/api/v1/items/1", false, 404},
	}
	for _, tc := range checks {
		r := tc.c.Must(t, "GET", tc.path, nil, tc.admin, nil)
		if r.Status != tc.status {
			t.Errorf("%s: GET %s got %d, want %d", tc.name, tc.path, r.Status, tc.status)
		}
		if tc.name == "admin API on admin" && r.ErrorCode() != "not_found" {
			t.Errorf("%s: got %s, want the admin API's not_found", tc.name, r.Body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: got %v, want nil after shutdown", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
	for _, l := range []net.Listener{pub, adm} {
		if conn, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts after shutdown", l.Addr())
		}
	}
}
