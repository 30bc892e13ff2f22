package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/stock"
)

const testAdminToken = "test-admin-token-0123456789"

func newTestHandler(t *testing.T, shop *fakeShop, cfg Config) *Handler {
	t.Helper()
	shop.t = t
	cfg.AdminToken = testAdminToken
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(shop, cfg)
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// code is the error code of an error answer, or "".
func (a answer) code() string {
	var e errorBody
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func call(h http.Handler, method, path, body string, header map[string]string) answer {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func pendingOrder(req stock.OrderRequest, status string) *stock.Order {
	now := time.Now().UTC()
	return &stock.Order{ID: "0190a0c2-0000-7000-8000-000000000001", ItemID: req.ItemID, UserID: req.UserID,
		Status: status, CreatedAt: now, UpdatedAt: now}
}

// TestErrorTable: every domain error the shop can return reaches the client
// as its status and code, wrapped or not, with the headers its status
// needs; an unknown error is a 500 that shows none of its text.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{stock.ErrSoldOut, 409, CodeSoldOut, ""},
		{stock.ErrAlreadyPurchased, 409, CodeAlreadyPurchased, ""},
		{stock.ErrSaleNotStarted, 409, CodeSaleNotStarted, ""},
		{stock.ErrSaleEnded, 409, CodeSaleEnded, ""},
		{stock.ErrNotFound, 404, CodeNotFound, ""},
		{stock.Invalidf("user_id %q is bad", "x"), 400, CodeInvalidRequest, ""},
		{stock.ErrIdempotencyConflict, 422, CodeIdempotencyConflict, ""},
		{stock.ErrUnavailable, 503, CodeUnavailable, "1"},
		{fmt.Errorf("redis: reserve: %w: %w", stock.ErrUnavailable, context.DeadlineExceeded), 503, CodeUnavailable, "1"},
		{&rateLimited{retryAfter: 2500 * time.Millisecond}, 429, CodeRateLimited, "3"},
		{errors.New("secret internal detail"), 500, CodeInternal, ""},
	}
	for _, tc := range cases {
		t.Run(tc.code+"/"+tc.err.Error(), func(t *testing.T) {
			shop := &fakeShop{placeOrder: func(context.Context, stock.OrderRequest) (*stock.Order, bool, error) {
				return nil, false, tc.err
			}}
			a := call(newTestHandler(t, shop, Config{}), "POST", "/api/v1/items/7/orders", `{"user_id":"alice"}`, nil)
			if a.status != tc.status || a.code() != tc.code {
				t.Fatalf("got %d %q, want %d %q (body %s)", a.status, a.code(), tc.status, tc.code, a.body)
			}
			if got := a.header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After: got %q, want %q", got, tc.retryAfter)
			}
			if tc.status == 500 && strings.Contains(string(a.body), "secret") {
				t.Errorf("a 500 shows the error's text: %s", a.body)
			}
		})
	}
	// Pay and cancel map the lifecycle errors through the same table.
	lifecycle := []struct {
		err  error
		code string
	}{
		{stock.ErrOrderPaid, CodeOrderPaid}, {stock.ErrOrderCancelled, CodeOrderCancelled},
		{stock.ErrOrderExpired, CodeOrderExpired}, {stock.ErrOrderPending, CodeOrderPending},
		{stock.ErrOrderFailed, CodeOrderFailed},
	}
	for _, tc := range lifecycle {
		shop := &fakeShop{
			payOrder:    func(context.Context, string, string) (*stock.Order, error) { return nil, tc.err },
			cancelOrder: func(context.Context, string, string) (*stock.Order, error) { return nil, tc.err },
		}
		h := newTestHandler(t, shop, Config{})
		for _, op := range []string{"pay", "cancel"} {
			a := call(h, "POST", "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001/"+op, `{"user_id":"alice"}`, nil)
			if a.status != 409 || a.code() != tc.code {
				t.Errorf("%s with %v: got %d %q, want 409 %q", op, tc.err, a.status, a.code(), tc.code)
			}
		}
	}
}

// TestFixedErrorBodies: an error answered from its body made once is the
// same, to the byte, as one encoded for the request: every kind with a
// fixed message, wrapped as the shop wraps it.
func TestFixedErrorBodies(t *testing.T) {
	t.Parallel()
	n := 0
	for _, k := range errorKinds {
		if k.msg == "" {
			continue
		}
		n++
		err := fmt.Errorf("some layer: %w", k.err)
		if k.err == errRateLimited {
			err = &rateLimited{retryAfter: time.Second}
		}
		shop := &fakeShop{placeOrder: func(context.Context, stock.OrderRequest) (*stock.Order, bool, error) {
			return nil, false, err
		}}
		a := call(newTestHandler(t, shop, Config{}), "POST", "/api/v1/items/7/orders", `{"user_id":"alice"}`, nil)
		want, _ := json.Marshal(errorBody{Error: errorDetail{Code: k.code, Message: k.msg}})
		if a.status != k.status || string(a.body) != string(want) {
			t.Errorf("%s: got %d %s, want %d %s", k.code, a.status, a.body, k.status, want)
		}
		if ct := a.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", k.code, ct)
		}
	}
	if n < 10 {
		t.Fatalf("only %d kinds with a fixed message", n)
	}
}

// TestOrderAnswers: a sale is 201 with Location, a queued lua-async order
// 202, a replay carries Idempotent-Replayed, and the shop receives exactly
// the request the client sent.
func TestOrderAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		status   string
		replayed bool
		want     int
	}{
		{"sold", stock.StatusCreated, false, 201},
		{"queued", stock.StatusPending, false, 202},
		{"replayed", stock.StatusCreated, true, 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got stock.OrderRequest
			shop := &fakeShop{placeOrder: func(_ context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
				got = req
				return pendingOrder(req, tc.status), tc.replayed, nil
			}}
			a := call(newTestHandler(t, shop, Config{}), "POST", "/api/v1/items/42/orders", `{"user_id":"Alice.B"}`,
				map[string]string{"Idempotency-Key": "k-1"})
			if a.status != tc.want {
				t.Fatalf("got %d, want %d (%s)", a.status, tc.want, a.body)
			}
			want := stock.OrderRequest{ItemID: 42, UserID: "Alice.B", IdempotencyKey: "k-1"}
			if got != want {
				t.Errorf("shop got %+v, want %+v", got, want)
			}
			if loc := a.header.Get("Location"); loc != "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001" {
				t.Errorf("Location: got %q", loc)
			}
			if r := a.header.Get("Idempotent-Replayed"); (r == "true") != tc.replayed {
				t.Errorf("Idempotent-Replayed: got %q, want replayed=%v", r, tc.replayed)
			}
		})
	}
}

// TestBadOrderInputNeverReachesTheShop: every malformed request is a 4xx
// decided by the handler; the shop is never called (fakeShop fails the
// test if it is).
func TestBadOrderInputNeverReachesTheShop(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, path, body string
		header           map[string]string
		status           int
		code             string
	}{
		{"not json", "/api/v1/items/1/orders", `{"user_id":`, nil, 400, CodeInvalidRequest},
		{"unknown field", "/api/v1/items/1/orders", `{"user_id":"a","admin":true}`, nil, 400, CodeInvalidRequest},
		{"field in another case", "/api/v1/items/1/orders", `{"USER_ID":"a"}`, nil, 400, CodeInvalidRequest},
		{"repeated field", "/api/v1/items/1/orders", `{"user_id":"a","user_id":"b"}`, nil, 400, CodeInvalidRequest},
		{"wrong type", "/api/v1/items/1/orders", `{"user_id":7}`, nil, 400, CodeInvalidRequest},
		{"no user", "/api/v1/items/1/orders", `{}`, nil, 400, CodeInvalidRequest},
		{"user with a space", "/api/v1/items/1/orders", `{"user_id":"a b"}`, nil, 400, CodeInvalidRequest},
		{"user too long", "/api/v1/items/1/orders", `{"user_id":"` + strings.Repeat("u", stock.MaxUserIDLen+1) + `"}`, nil, 400, CodeInvalidRequest},
		{"key not printable", "/api/v1/items/1/orders", `{"user_id":"a"}`, map[string]string{"Idempotency-Key": "k\x01"}, 400, CodeInvalidRequest},
		{"item id with a sign", "/api/v1/items/+1/orders", `{"user_id":"a"}`, nil, 400, CodeInvalidRequest},
		{"item id with a leading zero", "/api/v1/items/01/orders", `{"user_id":"a"}`, nil, 400, CodeInvalidRequest},
		{"item id not a number", "/api/v1/items/abc/orders", `{"user_id":"a"}`, nil, 400, CodeInvalidRequest},
		{"trailing slash", "/api/v1/items/1/orders/", `{"user_id":"a"}`, nil, 404, CodeNotFound},
		{"other letter case", "/api/v1/Items/1/orders", `{"user_id":"a"}`, nil, 404, CodeNotFound},
		{"too large", "/api/v1/items/1/orders", `{"user_id":"a","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, nil, 413, CodePayloadTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := call(newTestHandler(t, &fakeShop{}, Config{}), "POST", tc.path, tc.body, tc.header)
			if a.status != tc.status || a.code() != tc.code {
				t.Errorf("got %d %q, want %d %q (%s)", a.status, a.code(), tc.status, tc.code, a.body)
			}
		})
	}
	a := call(newTestHandler(t, &fakeShop{}, Config{}), "GET", "/api/v1/items/1/orders", "", nil)
	if a.status != 405 || a.code() != CodeMethodNotAllowed {
		t.Errorf("GET on the orders route: got %d %q, want 405 %q", a.status, a.code(), CodeMethodNotAllowed)
	}
}

// TestAdminToken: the admin routes need the admin bearer token, in any
// letter case of the scheme; without it nothing reaches the shop.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	body := `{"name":"phone","stock":2}`
	cases := []struct {
		name, auth string
		want       int
	}{
		{"none", "", 401},
		{"wrong token", "Bearer not-the-token-at-all", 401},
		{"token as basic", "Basic " + testAdminToken, 401},
		{"token without scheme", testAdminToken, 401},
		{"token with a suffix", "Bearer " + testAdminToken + "x", 401},
		{"bearer", "Bearer " + testAdminToken, 201},
		{"lower-case bearer", "bearer " + testAdminToken, 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created := 0
			shop := &fakeShop{}
			if tc.want == 201 {
				shop.createItem = func(_ context.Context, in stock.NewItem) (*stock.Item, error) {
					created++
					return &stock.Item{ID: 9, Name: in.Name, Stock: in.Stock, Strategy: "lua"}, nil
				}
			}
			a := call(newTestHandler(t, shop, Config{}), "POST", "/api/v1/admin/items", body, map[string]string{"Authorization": tc.auth})
			if a.status != tc.want {
				t.Fatalf("got %d, want %d (%s)", a.status, tc.want, a.body)
			}
			if tc.want == 401 {
				if a.code() != CodeUnauthorized || a.header.Get("WWW-Authenticate") == "" {
					t.Errorf("a 401 without its code or WWW-Authenticate: %q %v", a.code(), a.header)
				}
			} else if created != 1 {
				t.Errorf("CreateItem called %d times, want 1", created)
			}
		})
	}
}

// TestUserTokens: in JWT mode the order's user is the token's subject,
// whatever the body says, and only a valid, unexpired HS256 token counts.
func TestUserTokens(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	future := time.Now().Add(time.Hour).Unix()
	cases := []struct {
		name  string
		token string
		want  int
	}{
		{"valid", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "carol", "exp": future}), 201},
		{"expired", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(-time.Minute).Unix()}), 401},
		{"no expiry", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "carol"}), 401},
		{"other secret", sign(jwt.SigningMethodHS256, []byte(strings.Repeat("t", 32)), jwt.MapClaims{"sub": "carol", "exp": future}), 401},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "carol", "exp": future}), 401},
		{"HS512", sign(jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "carol", "exp": future}), 401},
		{"missing", "", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var users []string
			shop := &fakeShop{}
			if tc.want == 201 {
				shop.placeOrder = func(_ context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
					users = append(users, req.UserID)
					return pendingOrder(req, stock.StatusCreated), false, nil
				}
			}
			hdr := map[string]string{}
			if tc.token != "" {
				hdr["Authorization"] = "Bearer " + tc.token
			}
			h := newTestHandler(t, shop, Config{UserJWTSecret: secret})
			a := call(h, "POST", "/api/v1/items/3/orders", `{"user_id":"mallory"}`, hdr)
			if a.status != tc.want {
				t.Fatalf("got %d, want %d (%s)", a.status, tc.want, a.body)
			}
			if tc.want == 201 && (len(users) != 1 || users[0] != "carol") {
				t.Errorf("the shop sold to %v, want [carol] (the token's subject, not the body's user)", users)
			}
		})
	}
}

// TestOrdersOfOthersAreHidden: in JWT mode another user's order reads as
// not found.
func TestOrdersOfOthersAreHidden(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "dave", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	shop := &fakeShop{order: func(_ context.Context, id string) (*stock.Order, error) {
		return pendingOrder(stock.OrderRequest{ItemID: 1, UserID: "erin"}, stock.StatusCreated), nil
	}}
	a := call(newTestHandler(t, shop, Config{UserJWTSecret: secret}), "GET", "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001", "",
		map[string]string{"Authorization": "Bearer " + tok})
	if a.status != 404 || a.code() != CodeNotFound {
		t.Errorf("dave reading erin's order: got %d %q, want 404 %q", a.status, a.code(), CodeNotFound)
	}
}
