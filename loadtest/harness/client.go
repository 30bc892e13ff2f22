package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Item is the admin view of an item.
type Item struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int    `json:"stock"`
	Sold       int    `json:"sold"`
	Remaining  int    `json:"remaining"`
	Strategy   string `json:"strategy"`
}

// Order is the public view of an order.
type Order struct {
	ID     string `json:"id"`
	ItemID int64  `json:"item_id"`
	UserID string `json:"user_id"`
	Status string `json:"status"`
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type client struct {
	base      string
	adminBase string   // the admin listener; "" = base
	orders    []string // the instances order attempts are spread over; empty = base
	next      atomic.Uint64
	token     string
	http      *http.Client
}

func newClient(base, token string, conns int, timeout time.Duration) *client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only; never go through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &client{base: base, token: token, http: &http.Client{Transport: tr, Timeout: timeout}}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// do sends one request and returns the status, the body and a transport error.
func (c *client) do(ctx context.Context, method, path string, body any, hdr map[string]string) (int, []byte, error) {
	base := c.base
	if c.adminBase != "" && strings.HasPrefix(path, "/api/v1/admin/") {
		base = c.adminBase
	}
	return c.doAt(ctx, base, method, path, body, hdr)
}

// doAt is do against the instance at base.
func (c *client) doAt(ctx context.Context, base, method, path string, body any, hdr map[string]string) (int, []byte, error) {
	var rd io.Reader
	var n int64
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		// Hide the concrete reader type so http.NewRequest sets no GetBody:
		// net/http's Transport silently resends a request that carries an
		// Idempotency-Key when a reused connection fails, which would send
		// requests the history never sees and turn unknown outcomes into
		// answers. Every request here is sent exactly once.
		rd, n = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.ContentLength = n
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, b, err
	}
	return resp.StatusCode, b, nil
}

func (c *client) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.token}
}

func httpErr(op string, status int, body []byte) error {
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return fmt.Errorf("%s: HTTP %d %s: %s", op, status, e.Error.Code, e.Error.Message)
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Errorf("%s: HTTP %d: %s", op, status, body)
}

// createItem creates an item; extra holds more fields of the request
// (starts_at, waiting_room).
func (c *client) createItem(ctx context.Context, name string, stock int, strategy string, buckets int, extra map[string]any) (Item, error) {
	req := map[string]any{"name": name, "stock": stock, "price_cents": 100}
	for k, v := range extra {
		req[k] = v
	}
	if strategy != "" {
		req["strategy"] = strategy
	}
	if buckets > 0 {
		req["buckets"] = buckets
	}
	st, b, err := c.do(ctx, http.MethodPost, "/api/v1/admin/items", req, c.admin())
	if err != nil {
		return Item{}, fmt.Errorf("create item: %w", err)
	}
	if st != http.StatusCreated && st != http.StatusOK {
		return Item{}, httpErr("create item", st, b)
	}
	var it Item
	if err := json.Unmarshal(b, &it); err != nil {
		return Item{}, fmt.Errorf("create item: decode: %w", err)
	}
	if it.ID == 0 {
		return Item{}, fmt.Errorf("create item: response without id: %s", b)
	}
	return it, nil
}

// awaitItemEverywhere waits until every instance orders are spread over
// answers the item's public page: an instance learns of an item another
// one created when it next reads the database (at most the service's
// missing-item TTL, 1 s by default, after it last found the id unknown),
// and an admin creates a sale before it opens. It gives up after limit.
func (c *client) awaitItemEverywhere(ctx context.Context, id int64, limit time.Duration) error {
	if len(c.orders) < 2 {
		return nil
	}
	deadline := time.Now().Add(limit)
	path := "/api/v1/items/" + strconv.FormatInt(id, 10)
	for _, base := range c.orders {
		for {
			st, b, err := c.doAt(ctx, base, http.MethodGet, path, nil, nil)
			if err == nil && st == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = httpErr("item page", st, b)
				}
				return fmt.Errorf("item %d not known at %s %v after its creation: %w", id, base, limit, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func (c *client) getItem(ctx context.Context, id int64) (Item, error) {
	st, b, err := c.do(ctx, http.MethodGet, "/api/v1/admin/items/"+strconv.FormatInt(id, 10), nil, c.admin())
	if err != nil {
		return Item{}, fmt.Errorf("get item: %w", err)
	}
	if st != http.StatusOK {
		return Item{}, httpErr("get item", st, b)
	}
	var it Item
	if err := json.Unmarshal(b, &it); err != nil {
		return Item{}, fmt.Errorf("get item: decode: %w", err)
	}
	return it, nil
}

// getOrderTries bounds the reads of one order that answer 503.
const getOrderTries = 5

// errNotFound marks a 404 from GET /api/v1/orders/{id}.
var errNotFound = errors.New("order not found")

// getOrder reads an order. A 503 says "retry shortly" (the service's
// backends did not answer in time: a starved machine after a load), so it
// is asked again, up to getOrderTries times with a growing pause, as a
// client would; any other answer is final.
func (c *client) getOrder(ctx context.Context, id string) (Order, error) {
	st, b, err := c.do(ctx, http.MethodGet, "/api/v1/orders/"+id, nil, nil)
	for try, pause := 1, 100*time.Millisecond; err == nil && st == http.StatusServiceUnavailable && try < getOrderTries; try, pause = try+1, 2*pause {
		select {
		case <-ctx.Done():
			return Order{}, ctx.Err()
		case <-time.After(pause):
		}
		st, b, err = c.do(ctx, http.MethodGet, "/api/v1/orders/"+id, nil, nil)
	}
	if err != nil {
		return Order{}, err
	}
	if st == http.StatusNotFound {
		return Order{}, errNotFound
	}
	if st != http.StatusOK {
		return Order{}, httpErr("get order", st, b)
	}
	var o Order
	if err := json.Unmarshal(b, &o); err != nil {
		return Order{}, fmt.Errorf("get order: decode: %w", err)
	}
	return o, nil
}

// placeOrder sends one order attempt to the next instance in turn and
// fills the outcome fields of r.
func (c *client) placeOrder(ctx context.Context, r *Record) {
	base := c.base
	if len(c.orders) > 0 {
		r.Instance = int((c.next.Add(1) - 1) % uint64(len(c.orders)))
		base = c.orders[r.Instance]
	}
	hdr := map[string]string{"Idempotency-Key": r.Key}
	if r.pass != "" {
		hdr[passHeader] = r.pass
	}
	r.Start = time.Now()
	st, b, err := c.doAt(ctx, base, http.MethodPost, "/api/v1/items/"+strconv.FormatInt(r.ItemID, 10)+"/orders",
		map[string]string{"user_id": r.User}, hdr)
	r.End = time.Now()
	r.Status = st
	if err != nil {
		r.Err = err.Error()
		r.Outcome = OutcomeTransport
		return
	}
	if st >= 200 && st < 300 {
		var o Order
		if jerr := json.Unmarshal(b, &o); jerr != nil || o.ID == "" {
			r.Outcome = OutcomeBadAck
			r.Err = fmt.Sprintf("2xx without an order id: %.200s", b)
			return
		}
		r.OrderID, r.OrderStatus = o.ID, o.Status
		if st == http.StatusAccepted || o.Status == "pending" {
			r.Outcome = OutcomePending
		} else {
			r.Outcome = OutcomeCreated
		}
		return
	}
	var e apiError
	_ = json.Unmarshal(b, &e)
	r.Code = e.Error.Code
	r.Outcome = classify(st, e.Error.Code)
}

// Outcomes of an order attempt.
const (
	OutcomeCreated          = "created"           // 2xx, order created
	OutcomePending          = "pending"           // 202, accepted for asynchronous persistence
	OutcomeSoldOut          = "sold_out"          // 409 sold_out
	OutcomeAlreadyPurchased = "already_purchased" // 409 already_purchased
	OutcomeNotStarted       = "sale_not_started"
	OutcomeEnded            = "sale_ended"
	OutcomeIdemConflict     = "idempotency_conflict"
	OutcomeRateLimited      = "rate_limited"
	OutcomeUnavailable      = "unavailable"     // 503
	OutcomeServerError      = "server_error"    // other 5xx
	OutcomeClientError      = "client_error"    // other 4xx
	OutcomeTransport        = "transport_error" // no response (timeout, reset, ...)
	OutcomeBadAck           = "bad_ack"         // 2xx that does not carry an order id
)

func classify(status int, code string) string {
	switch {
	case status == http.StatusConflict:
		switch code {
		case OutcomeSoldOut, OutcomeAlreadyPurchased, OutcomeNotStarted, OutcomeEnded:
			return code
		}
		return OutcomeClientError
	case status == http.StatusUnprocessableEntity && code == OutcomeIdemConflict:
		return OutcomeIdemConflict
	case status == http.StatusTooManyRequests:
		return OutcomeRateLimited
	case status == http.StatusServiceUnavailable:
		return OutcomeUnavailable
	case status >= 500:
		return OutcomeServerError
	}
	return OutcomeClientError
}

// acked reports whether the service acknowledged an order.
func acked(outcome string) bool { return outcome == OutcomeCreated || outcome == OutcomePending }

// unknownOutcome reports whether the client cannot tell whether an order was
// made: no response at all, or a server error.
func unknownOutcome(outcome string) bool {
	return outcome == OutcomeTransport || outcome == OutcomeServerError || outcome == OutcomeUnavailable || outcome == OutcomeBadAck
}

// definiteRefusal reports a business answer that means "no order for you".
func definiteRefusal(outcome string) bool {
	switch outcome {
	case OutcomeSoldOut, OutcomeAlreadyPurchased, OutcomeNotStarted, OutcomeEnded:
		return true
	}
	return false
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
