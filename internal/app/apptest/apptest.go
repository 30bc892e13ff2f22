// Package apptest starts the whole service in-process on a test backend and
// talks to it over real HTTP.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// Token is the admin token every test app uses.
const Token = "test-admin-token-0123456789"

// Start runs the service on b behind an httptest server. edit may adjust the
// config before start.
func Start(t testing.TB, b testenv.Backend, edit ...func(*app.Config)) (*app.App, *Client) {
	t.Helper()
	// Warnings go to the test log, which is shown when the test fails.
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return StartLogged(t, b, log, edit...)
}

// StartLogged is Start with the service logging to log.
func StartLogged(t testing.TB, b testenv.Backend, log *slog.Logger, edit ...func(*app.Config)) (*app.App, *Client) {
	t.Helper()
	cfg := app.Config{RedisURL: b.RedisURL, RedisMode: b.RedisMode, MySQLDSN: b.MySQLDSN, SQLitePath: b.SQLitePath,
		KeyPrefix: b.KeyPrefix, AdminToken: Token}
	// -race slows every client call 5-10x on a 2-core machine; the proofs
	// are about correctness, so calls get room. Outage tests set their own.
	cfg.RedisTimeout = 3 * time.Second
	if b.Mini != nil {
		cfg.RedisTimeout = 10 * time.Second // as the embedded default
	}
	// Likewise each step of an order's transaction, which includes the
	// wait for a pooled connection (the production default is 1s).
	cfg.DBTimeout = 5 * time.Second
	// And the request bound itself: a proof's 2,000 concurrent requests
	// wait their turn at one embedded Redis, which -race and a busy machine
	// slow down; a request over 10s is a 503 there, not a broken promise.
	// Tests of deadlines set their own.
	cfg.RequestTimeout = 30 * time.Second
	// Every test client joins rooms from loopback: the per-address limit of
	// joins is off unless a test turns it on.
	cfg.RoomRateIP = "0"
	for _, e := range edit {
		e(&cfg)
	}
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("start app on %s: %v", b.Name, err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return a, NewClient(srv.URL, Token)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Client calls the API.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client with a pool large enough for a stampede.
func NewClient(base, token string) *Client {
	tr := &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 30 * time.Second}
	return &Client{Base: base, Token: token, HTTP: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// Response is a decoded answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it is not JSON.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %d body %q: %v", r.Status, r.Body, err)
	}
}

// ErrorCode is the error.code of an error answer, or "".
func (r Response) ErrorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Do sends a request; body may be nil, a string (sent as is) or a value
// (sent as JSON). admin adds the bearer token. Transport errors are returned.
func (c *Client) Do(method, path string, body any, admin bool, header map[string]string) (Response, error) {
	h := make(http.Header, len(header))
	for k, v := range header {
		h.Set(k, v)
	}
	return c.DoHeader(method, path, body, admin, h)
}

// DoHeader is Do with a header that may give a name several values, each
// sent as a line of its own; they replace the admin token's Authorization.
func (c *Client) DoHeader(method, path string, body any, admin bool, header http.Header) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return Response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, err
}

// Must is Do that fails the test on a transport error.
func (c *Client) Must(t testing.TB, method, path string, body any, admin bool, header map[string]string) Response {
	t.Helper()
	r, err := c.Do(method, path, body, admin, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Item is the admin view of an item.
type Item struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Stock     int64  `json:"stock"`
	Sold      int64  `json:"sold"`
	Remaining int64  `json:"remaining"`
	Strategy  string `json:"strategy"`
	Buckets   int    `json:"buckets"`
}

// CreateItem creates an item through the admin API.
func (c *Client) CreateItem(t testing.TB, stock int64, strategy string) Item {
	t.Helper()
	return c.CreateBucketedItem(t, stock, strategy, 1)
}

// CreateBucketedItem creates an item whose stock is split over buckets
// gate buckets.
func (c *Client) CreateBucketedItem(t testing.TB, stock int64, strategy string, buckets int) Item {
	t.Helper()
	body := map[string]any{"name": "test item", "stock": stock, "strategy": strategy}
	if buckets != 1 {
		body["buckets"] = buckets
	}
	r := c.Must(t, "POST", "/api/v1/admin/items", body, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create item: got %d %s, want 201", r.Status, r.Body)
	}
	var it Item
	r.JSON(t, &it)
	return it
}

// AdminItem reads an item through the admin API.
func (c *Client) AdminItem(t testing.TB, id int64) Item {
	t.Helper()
	r := c.Must(t, "GET", "/api/v1/admin/items/"+itoa(id), nil, true, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("admin item: got %d %s, want 200", r.Status, r.Body)
	}
	var it Item
	r.JSON(t, &it)
	return it
}

// Order is an order as the API shows it.
type Order struct {
	ID        string     `json:"id"`
	ItemID    int64      `json:"item_id"`
	UserID    string     `json:"user_id"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// SettleOrder posts to /api/v1/orders/{id}/{action} ("pay" or "cancel")
// with body (see Do) and header.
func (c *Client) SettleOrder(id, action string, body any, header map[string]string) (Response, error) {
	return c.Do("POST", "/api/v1/orders/"+id+"/"+action, body, false, header)
}

// PlaceOrder posts an order attempt; key may be empty.
func (c *Client) PlaceOrder(itemID int64, user, key string) (Response, error) {
	var h map[string]string
	if key != "" {
		h = map[string]string{"Idempotency-Key": key}
	}
	return c.Do("POST", "/api/v1/items/"+itoa(itemID)+"/orders", map[string]string{"user_id": user}, false, h)
}

// AwaitOrder reads an order until it is no longer pending (lua-async
// writers persist it) or wait passes, and returns it as last read.
func (c *Client) AwaitOrder(t testing.TB, id string, wait time.Duration) Order {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		r := c.Must(t, "GET", "/api/v1/orders/"+id, nil, false, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET order %s: got %d %s, want 200", id, r.Status, r.Body)
		}
		var o Order
		r.JSON(t, &o)
		if o.Status != "pending" || time.Now().After(deadline) {
			return o
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
