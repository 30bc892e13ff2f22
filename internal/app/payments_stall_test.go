package app_test

import (
	"net/http"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// webhookStallDBTimeout is SECKILL_DB_TIMEOUT in the stall test: the
// production default, well under its request timeout
// (webhookStallRequestTimeout), so a 503 that comes from it is told apart
// from one the request's deadline made.
const (
	webhookStallDBTimeout      = time.Second
	webhookStallRequestTimeout = 4 * time.Second
)

// stalledWebhook runs the service on MariaDB through a proxy, stalls the
// database and posts a payment: the answer must be a 503 that records
// nothing. Once the database heals, the provider's redelivery pays the
// order, once. It returns how long the 503 took.
func stalledWebhook(t *testing.T) time.Duration {
	b := testenv.Real(t)
	dsn, err := gomysql.ParseDSN(b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, dsn.Addr)
	proxied := *dsn
	proxied.Addr = proxy.Addr()
	pb := b
	pb.MySQLDSN = proxied.FormatDSN()
	_, c := apptest.Start(t, pb, func(cfg *app.Config) {
		cfg.StripeWebhookSecret = stripeSecret
		cfg.DBTimeout = webhookStallDBTimeout
		cfg.RequestTimeout = webhookStallRequestTimeout
	})
	st, err := store.New(b.DB(t), nil) // not through the proxy
	if err != nil {
		t.Fatal(err)
	}
	id := buyPriced(t, c, paymentItem(t, c), "stalled")
	body := webhookEvent("evt_stalled", id, priceCents, "usd")

	proxy.Stall()
	start := time.Now()
	r := postWebhook(t, c, body, stripeSecret)
	took := time.Since(start)
	proxy.Heal()
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unavailable" {
		t.Fatalf("webhook with the database stalled: got %d %s after %v, want 503 unavailable", r.Status, r.Body, took)
	}
	if pe, err := st.PaymentEvents(t.Context(), id); err != nil || len(pe) != 0 {
		t.Fatalf("a 503 recorded the payment: %+v %v", pe, err)
	}
	// The provider retries; the first attempt's transaction, whose
	// connection the driver closed, rolls back on the server meanwhile.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = postWebhook(t, c, body, stripeSecret)
		if r.Status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantWebhook(t, r, "paid", false)
	if n := countEvents(t, st, id, store.EventPaid); n != 1 {
		t.Fatalf("%d paid events, want 1", n)
	}
	return took
}

// A database that stalls during a webhook: 503 and nothing recorded; the
// redelivery after it heals pays the order once.
func TestStripeWebhookDatabaseStalled(t *testing.T) {
	t.Parallel()
	stalledWebhook(t)
}

// A payment for a lua-async order still queued (no writer runs here) is
// 409 order_pending and recorded nowhere: the provider retries once the
// order is written, and its payment is not rejected as naming no order.
func TestStripeWebhookPendingOrderIsRetried(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	_, c := apptest.Start(t, b, func(cfg *app.Config) {
		cfg.StripeWebhookSecret = stripeSecret
		cfg.Writers = queue.NoWriters
	})
	st, err := store.New(b.DB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "queued", "stock": 3, "strategy": "lua-async", "price_cents": priceCents}, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create item: %d %s", r.Status, r.Body)
	}
	var it apptest.Item
	r.JSON(t, &it)
	r, err = c.PlaceOrder(it.ID, "queued", "")
	if err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("order: %v %d %s", err, r.Status, r.Body)
	}
	var o apptest.Order
	r.JSON(t, &o)
	r = postWebhook(t, c, webhookEvent("evt_pending", o.ID, priceCents, "usd"), stripeSecret)
	if r.Status != http.StatusConflict || r.ErrorCode() != "order_pending" {
		t.Fatalf("webhook for a pending order: got %d %s, want 409 order_pending", r.Status, r.Body)
	}
	if pe, err := st.PaymentEvents(t.Context(), o.ID); err != nil || len(pe) != 0 {
		t.Fatalf("the pending order's payment was recorded: %+v %v", pe, err)
	}
}
