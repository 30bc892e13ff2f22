package handler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/stock"
)

// callHeader is call with a header that may repeat; a POST carries
// {"user_id":"a"}, a valid body of an order, a payment or a cancellation.
func callHeader(h http.Handler, method, path string, header http.Header) answer {
	body := ""
	if method == http.MethodPost {
		body = `{"user_id":"a"}`
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// TestOneSpellingOfQueriesAndHeaders: a single-valued header or a query
// parameter given twice, and a number in the query in any spelling but
// the ids' one, are a 400 decided by the handler: the shop is never
// called (fakeShop fails the test if it is). Nothing is read as the first
// or the last of two values, which a proxy or client library may pick
// differently.
func TestOneSpellingOfQueriesAndHeaders(t *testing.T) {
	t.Parallel()
	admin := "Bearer " + testAdminToken
	secret := []byte("user-token-secret-0123456789abcdef")
	userToken := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	cases := []struct {
		name, method, path string
		header             http.Header
		jwt                bool
	}{
		{"two Idempotency-Key headers", "POST", "/api/v1/items/1/orders", http.Header{"Idempotency-Key": {"k1", "k2"}}, false},
		{"two equal Idempotency-Key headers", "POST", "/api/v1/items/1/orders", http.Header{"Idempotency-Key": {"k1", "k1"}}, false},
		{"two admin Authorization headers", "GET", "/api/v1/admin/items/1", http.Header{"Authorization": {admin, admin}}, false},
		{"admin Authorization twice, first wrong", "GET", "/api/v1/admin/items/1", http.Header{"Authorization": {"Bearer wrong", admin}}, false},
		{"two user Authorization headers", "POST", "/api/v1/items/1/orders", http.Header{"Authorization": {userToken("u1"), userToken("u2")}}, true},
		{"two user Authorization headers on GET order", "GET", "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001", http.Header{"Authorization": {userToken("u1"), userToken("u1")}}, true},
		{"two user Authorization headers on pay", "POST", "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001/pay", http.Header{"Authorization": {userToken("u1"), userToken("u2")}}, true},
		{"limit twice", "GET", "/api/v1/admin/items?limit=1&limit=200000", http.Header{"Authorization": {admin}}, false},
		{"limit twice, same value", "GET", "/api/v1/admin/items?limit=5&limit=5", http.Header{"Authorization": {admin}}, false},
		{"limit with a leading zero", "GET", "/api/v1/admin/items?limit=05", http.Header{"Authorization": {admin}}, false},
		{"limit with a plus sign", "GET", "/api/v1/admin/items?limit=%2B5", http.Header{"Authorization": {admin}}, false},
		{"limit empty", "GET", "/api/v1/admin/items?limit=", http.Header{"Authorization": {admin}}, false},
		{"limit zero", "GET", "/api/v1/admin/items?limit=0", http.Header{"Authorization": {admin}}, false},
		{"limit over the cap", "GET", "/api/v1/admin/items?limit=201", http.Header{"Authorization": {admin}}, false},
		{"before with a leading zero", "GET", "/api/v1/admin/items?before=07", http.Header{"Authorization": {admin}}, false},
		{"before twice", "GET", "/api/v1/admin/items?before=7&before=9", http.Header{"Authorization": {admin}}, false},
		{"status twice", "GET", "/api/v1/admin/items?status=on_sale&status=ended", http.Header{"Authorization": {admin}}, false},
		{"status empty", "GET", "/api/v1/admin/items?status=", http.Header{"Authorization": {admin}}, false},
		{"dead-letters limit twice", "GET", "/api/v1/admin/items/1/dead-letters?limit=1&limit=10000", http.Header{"Authorization": {admin}}, false},
		{"dead-letters limit with a leading zero", "GET", "/api/v1/admin/items/1/dead-letters?limit=010", http.Header{"Authorization": {admin}}, false},
		{"dead-letters limit empty", "GET", "/api/v1/admin/items/1/dead-letters?limit=", http.Header{"Authorization": {admin}}, false},
		{"dry_run twice", "POST", "/api/v1/admin/items/1/reconcile?dry_run=true&dry_run=false", http.Header{"Authorization": {admin}}, false},
		{"dry_run twice, same value", "POST", "/api/v1/admin/items/1/reconcile?dry_run=true&dry_run=true", http.Header{"Authorization": {admin}}, false},
		{"dry_run empty", "POST", "/api/v1/admin/items/1/reconcile?dry_run=", http.Header{"Authorization": {admin}}, false},
		{"dry_run before a semicolon", "POST", "/api/v1/admin/items/1/reconcile?dry_run=true;x=1", http.Header{"Authorization": {admin}}, false},
		{"dry_run before a bad escape", "POST", "/api/v1/admin/items/1/reconcile?dry_run=true&x=%zz", http.Header{"Authorization": {admin}}, false},
		{"limit with a bad escape", "GET", "/api/v1/admin/items?limit=%5", http.Header{"Authorization": {admin}}, false},
		{"dry_run in capitals", "POST", "/api/v1/admin/items/1/reconcile?dry_run=TRUE", http.Header{"Authorization": {admin}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if tc.jwt {
				cfg.UserJWTSecret = secret
			}
			a := callHeader(newTestHandler(t, &fakeShop{}, cfg), tc.method, tc.path, tc.header)
			if a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
				t.Errorf("got %d %s, want 400 %s", a.status, a.body, CodeInvalidRequest)
			}
		})
	}
}

// TestQueryNumbersTaken: the canonical spellings still reach the shop as
// the numbers they are.
func TestQueryNumbersTaken(t *testing.T) {
	t.Parallel()
	var got stock.ItemFilter
	shop := &fakeShop{listItems: func(_ context.Context, f stock.ItemFilter) (*stock.ItemPage, error) {
		got = f
		return &stock.ItemPage{}, nil
	}}
	h := newTestHandler(t, shop, Config{})
	auth := http.Header{"Authorization": {"Bearer " + testAdminToken}}
	for path, want := range map[string]stock.ItemFilter{
		"/api/v1/admin/items": {Limit: 50},
		"/api/v1/admin/items?limit=200&before=9223372036854775807":   {Limit: 200, Before: 1<<63 - 1},
		"/api/v1/admin/items?limit=1&status=on_sale&before=10":       {Limit: 1, Status: "on_sale", Before: 10},
		"/api/v1/admin/items?limit=7&unread=1&unread=2&utm_source=x": {Limit: 7},
	} {
		got = stock.ItemFilter{}
		if a := callHeader(h, "GET", path, auth); a.status != http.StatusOK || got != want {
			t.Errorf("GET %s: got %d %+v, want 200 %+v (%s)", path, a.status, got, want, a.body)
		}
	}
	var limit int64
	var repair []bool
	shop.deadLetters = func(_ context.Context, _, l int64) ([]stock.DeadLetter, error) { limit = l; return nil, nil }
	shop.reconcile = func(_ context.Context, id int64, r bool) (*stock.Reconciliation, error) {
		repair = append(repair, r)
		return &stock.Reconciliation{ItemID: id}, nil
	}
	if a := callHeader(h, "GET", "/api/v1/admin/items/1/dead-letters?limit=10000", auth); a.status != 200 || limit != 10000 {
		t.Errorf("dead letters ?limit=10000: got %d and limit %d, want 200 and 10000", a.status, limit)
	}
	for _, q := range []string{"", "?dry_run=false", "?dry_run=true"} {
		if a := callHeader(h, "POST", "/api/v1/admin/items/1/reconcile"+q, auth); a.status != 200 {
			t.Errorf("reconcile%s: got %d %s, want 200", q, a.status, a.body)
		}
	}
	if want := []bool{true, true, false}; len(repair) != 3 || repair[0] != want[0] || repair[1] != want[1] || repair[2] != want[2] {
		t.Errorf("reconcile repairs: got %v, want %v", repair, want)
	}
}

// TestRequestIDRepeated: two X-Request-Id headers are not one sane id, so
// the request gets a fresh one, as for any other unfit id.
func TestRequestIDRepeated(t *testing.T) {
	t.Parallel()
	shop := &fakeShop{ready: func(context.Context) error { return nil },
		backlog: func(context.Context) (stock.AsyncStats, error) { return stock.AsyncStats{}, nil }}
	h := newTestHandler(t, shop, Config{})
	one := callHeader(h, "GET", "/readyz", http.Header{RequestIDHeader: {"req-1"}})
	if got := one.header.Get(RequestIDHeader); got != "req-1" {
		t.Errorf("one X-Request-Id: got %q back, want req-1", got)
	}
	two := callHeader(h, "GET", "/readyz", http.Header{RequestIDHeader: {"req-1", "req-2"}})
	if got := two.header.Get(RequestIDHeader); got == "" || got == "req-1" || got == "req-2" {
		t.Errorf("two X-Request-Id: got %q back, want a fresh id", got)
	}
}

// TestIfNoneMatchRepeated: If-None-Match is a list (RFC 9110 13.1.2), so
// its values may come in several header lines; any of them matches.
func TestIfNoneMatchRepeated(t *testing.T) {
	t.Parallel()
	view := &stock.ItemView{ID: 1, Name: "x", Remaining: 3}
	h := newTestHandler(t, &fakeShop{itemView: func(context.Context, int64) (*stock.ItemView, error) { return view, nil }}, Config{})
	etag := callHeader(h, "GET", "/api/v1/items/1", nil).header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	a := callHeader(h, "GET", "/api/v1/items/1", http.Header{"If-None-Match": {`"other"`, etag}})
	if a.status != http.StatusNotModified {
		t.Errorf("If-None-Match in two lines, the second matching: got %d, want 304", a.status)
	}
}
