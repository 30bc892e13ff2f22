package handler

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/stock"
)

const (
	testOrderID   = "0190a0c2-0000-7000-8000-000000000001"
	webhookSecret = "whsec_test_current_0123456789abcdef"
	oldSecret     = "whsec_test_previous_0123456789abcdef"
	webhookPath   = "/api/v1/payments/stripe"
)

// fakePayments records the payments it is given and answers with answer.
type fakePayments struct {
	mu     sync.Mutex
	got    []stock.Payment
	cur    []string
	answer func(ctx context.Context, p stock.Payment) (stock.PaymentRecord, error)
}

func (f *fakePayments) RecordPayment(ctx context.Context, p stock.Payment, currency string) (stock.PaymentRecord, error) {
	f.mu.Lock()
	f.got, f.cur = append(f.got, p), append(f.cur, currency)
	f.mu.Unlock()
	if f.answer != nil {
		return f.answer(ctx, p)
	}
	return stock.PaymentRecord{Outcome: stock.PaymentPaid}, nil
}

func (f *fakePayments) calls() []stock.Payment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stock.Payment(nil), f.got...)
}

// intentEvent is a payment_intent.succeeded event's body.
func intentEvent(id, order string, amount int64, currency string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2019-02-19","created":1700000000,"type":"payment_intent.succeeded",`+
		`"data":{"object":{"id":"pi_1","object":"payment_intent","amount":%d,"amount_received":%d,"currency":%q,"status":"succeeded",`+
		`"metadata":{"order_id":%q}}}}`, id, amount, amount, currency, order)
}

func sessionEvent(id, order string, amount int64, status string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2025-03-31.basil","type":"checkout.session.completed",`+
		`"data":{"object":{"id":"cs_1","object":"checkout.session","amount_total":%d,"currency":"usd","payment_status":%q,`+
		`"metadata":{"order_id":%q}}}}`, id, amount, status, order)
}

// signed is the Stripe-Signature header of body signed with secret at t,
// made by stripe-go's own test helper.
func signed(body, secret string, t time.Time) map[string]string {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: t})
	return map[string]string{"Stripe-Signature": sp.Header, "Content-Type": "application/json"}
}

func newWebhookHandler(t *testing.T, pay *fakePayments, edit func(*Config)) *Handler {
	cfg := Config{StripeWebhookSecrets: []string{webhookSecret}, Payments: pay, Metrics: metrics.New(nil)}
	if edit != nil {
		edit(&cfg)
	}
	return newTestHandler(t, &fakeShop{}, cfg)
}

func webhookCount(h *Handler, outcome string) float64 {
	return testutil.ToFloat64(h.cfg.Metrics.PaymentWebhookCounter(outcome))
}

// A signed payment_intent.succeeded reaches Payments with its order,
// amount and currency; the answer carries the outcome.
func TestStripeWebhookRecordsPayment(t *testing.T) {
	t.Parallel()
	pay := &fakePayments{}
	h := newWebhookHandler(t, pay, func(c *Config) { c.Currency = "EUR" })
	body := intentEvent("evt_1", testOrderID, 1250, "eur")
	a := call(h, "POST", webhookPath, body, signed(body, webhookSecret, time.Now()))
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"outcome":"paid"`) {
		t.Fatalf("got %d %s", a.status, a.body)
	}
	got := pay.calls()
	if len(got) != 1 || got[0].EventID != "evt_1" || got[0].OrderID != testOrderID || got[0].Amount != 1250 ||
		got[0].Currency != "eur" || got[0].Type != "payment_intent.succeeded" || got[0].ReceivedAt.IsZero() || pay.cur[0] != "eur" ||
		!got[0].PaidAt.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("payments %+v, currencies %v", got, pay.cur)
	}
	if n := webhookCount(h, "paid"); n != 1 {
		t.Fatalf("paid webhooks counted %v", n)
	}
}

// A forged, tampered, unsigned or old signature is 400 signature_invalid
// and reaches nothing; a tolerance set wider admits the old one.
func TestStripeWebhookRefusesBadSignatures(t *testing.T) {
	t.Parallel()
	pay := &fakePayments{}
	h := newWebhookHandler(t, pay, nil)
	body := intentEvent("evt_1", testOrderID, 1250, "usd")
	now := time.Now()
	cases := map[string]struct {
		body   string
		header map[string]string
	}{
		"forged":   {body, signed(body, "whsec_not_the_secret", now)},
		"tampered": {strings.Replace(body, "1250", "1", 2), signed(body, webhookSecret, now)},
		"unsigned": {body, nil},
		"garbage":  {body, map[string]string{"Stripe-Signature": "t=x,v1=zz"}},
		// Ten minutes old, the tolerance is five: no race with the clock.
		"old": {body, signed(body, webhookSecret, now.Add(-10*time.Minute))},
	}
	for name, c := range cases {
		a := call(h, "POST", webhookPath, c.body, c.header)
		if a.status != http.StatusBadRequest || a.code() != CodeSignatureInvalid {
			t.Errorf("%s: got %d %s, want 400 %s", name, a.status, a.body, CodeSignatureInvalid)
		}
	}
	if got := pay.calls(); len(got) != 0 {
		t.Fatalf("a bad signature reached the payments: %+v", got)
	}
	if n := webhookCount(h, "signature_invalid"); n != float64(len(cases)) {
		t.Fatalf("signature_invalid counted %v, want %d", n, len(cases))
	}
	// The tolerance is the handler's option: an hour admits the old one.
	wide := newWebhookHandler(t, pay, func(c *Config) { c.StripeTolerance = time.Hour })
	if a := call(wide, "POST", webhookPath, body, cases["old"].header); a.status != http.StatusOK {
		t.Fatalf("with an hour's tolerance: got %d %s", a.status, a.body)
	}
	if a := call(wide, "POST", webhookPath, body, signed(body, webhookSecret, now.Add(-2*time.Hour))); a.code() != CodeSignatureInvalid {
		t.Fatalf("two hours old with an hour's tolerance: got %d %s", a.status, a.body)
	}
}

// During a rotation an event signed with either secret verifies.
func TestStripeWebhookRotatedSecret(t *testing.T) {
	t.Parallel()
	pay := &fakePayments{}
	h := newWebhookHandler(t, pay, func(c *Config) { c.StripeWebhookSecrets = []string{oldSecret, webhookSecret} })
	for i, secret := range []string{webhookSecret, oldSecret} {
		body := intentEvent(fmt.Sprintf("evt_%d", i), testOrderID, 1250, "usd")
		if a := call(h, "POST", webhookPath, body, signed(body, secret, time.Now())); a.status != http.StatusOK {
			t.Fatalf("signed with secret %d: got %d %s", i, a.status, a.body)
		}
	}
	body := intentEvent("evt_x", testOrderID, 1250, "usd")
	if a := call(h, "POST", webhookPath, body, signed(body, "whsec_neither", time.Now())); a.code() != CodeSignatureInvalid {
		t.Fatalf("signed with neither: got %d %s", a.status, a.body)
	}
	if got := pay.calls(); len(got) != 2 {
		t.Fatalf("payments %+v", got)
	}
}

// Other event types, and a checkout session not paid yet, are 200
// ignored; a paid session is recorded with its amount_total; a body that
// is no event is 400; one over 64 KiB 413.
func TestStripeWebhookEventTypes(t *testing.T) {
	t.Parallel()
	pay := &fakePayments{}
	h := newWebhookHandler(t, pay, nil)
	now := time.Now()
	for _, body := range []string{
		`{"id":"evt_c","object":"event","type":"customer.created","data":{"object":{"id":"cus_1","object":"customer"}}}`,
		sessionEvent("evt_unpaid", testOrderID, 1250, "unpaid"),
	} {
		a := call(h, "POST", webhookPath, body, signed(body, webhookSecret, now))
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"outcome":"ignored"`) {
			t.Fatalf("got %d %s", a.status, a.body)
		}
	}
	if got := pay.calls(); len(got) != 0 {
		t.Fatalf("an ignored event was recorded: %+v", got)
	}
	body := sessionEvent("evt_paid", testOrderID, 990, "paid")
	if a := call(h, "POST", webhookPath, body, signed(body, webhookSecret, now)); a.status != http.StatusOK {
		t.Fatalf("paid session: got %d %s", a.status, a.body)
	}
	if got := pay.calls(); len(got) != 1 || got[0].Amount != 990 || got[0].Type != "checkout.session.completed" || got[0].OrderID != testOrderID {
		t.Fatalf("payments %+v", got)
	}
	for _, bad := range []string{`not json`, `{"object":"event","type":"payment_intent.succeeded","data":{"object":{}}}`,
		`{"id":"evt_nodata","object":"event","type":"payment_intent.succeeded"}`} {
		if a := call(h, "POST", webhookPath, bad, signed(bad, webhookSecret, now)); a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
			t.Errorf("%s: got %d %s", bad, a.status, a.body)
		}
	}
	big := intentEvent("evt_big", testOrderID+strings.Repeat(" ", MaxBodyBytes), 1250, "usd")
	if a := call(h, "POST", webhookPath, big, signed(big, webhookSecret, now)); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over 64 KiB: got %d", a.status)
	}
	if got := pay.calls(); len(got) != 1 {
		t.Fatalf("payments %+v", got)
	}
}

// A database that does not answer within PaymentTimeout is a 503 (the
// provider retries); a redelivery is answered 200 with its first outcome.
func TestStripeWebhookUnavailableAndRedelivered(t *testing.T) {
	t.Parallel()
	stalled := &fakePayments{answer: func(ctx context.Context, p stock.Payment) (stock.PaymentRecord, error) {
		<-ctx.Done() // a stalled database: only the bound ends the call
		return stock.PaymentRecord{}, fmt.Errorf("database: record payment: %w", ctx.Err())
	}}
	h := newWebhookHandler(t, stalled, func(c *Config) { c.PaymentTimeout = 50 * time.Millisecond })
	body := intentEvent("evt_1", testOrderID, 1250, "usd")
	if a := call(h, "POST", webhookPath, body, signed(body, webhookSecret, time.Now())); a.status != http.StatusServiceUnavailable || a.code() != CodeUnavailable {
		t.Fatalf("stalled: got %d %s", a.status, a.body)
	}
	dup := &fakePayments{answer: func(context.Context, stock.Payment) (stock.PaymentRecord, error) {
		return stock.PaymentRecord{Outcome: stock.PaymentRefundDue, Reason: "the order is cancelled", Duplicate: true}, nil
	}}
	h = newWebhookHandler(t, dup, nil)
	a := call(h, "POST", webhookPath, body, signed(body, webhookSecret, time.Now()))
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"duplicate":true`) || !strings.Contains(string(a.body), `"outcome":"refund_due"`) {
		t.Fatalf("redelivered: got %d %s", a.status, a.body)
	}
	if n := webhookCount(h, "duplicate"); n != 1 {
		t.Fatalf("duplicates counted %v", n)
	}
}

// With a webhook secret the buyer's /pay is 403 payment_by_provider and
// reaches nothing; without one the webhook is 404 and /pay is the
// buyer's.
func TestBuyerPayOnlyWithoutProvider(t *testing.T) {
	t.Parallel()
	h := newWebhookHandler(t, &fakePayments{}, nil)
	a := call(h, "POST", "/api/v1/orders/"+testOrderID+"/pay", `{"user_id":"alice"}`, nil)
	if a.status != http.StatusForbidden || a.code() != CodePaymentByProvider {
		t.Fatalf("/pay with a provider: got %d %s", a.status, a.body)
	}
	paid := 0
	shop := &fakeShop{payOrder: func(_ context.Context, id, user string) (*stock.Order, error) {
		paid++
		return &stock.Order{ID: id, UserID: user, Status: stock.StatusPaid}, nil
	}}
	demo := newTestHandler(t, shop, Config{})
	if a := call(demo, "POST", "/api/v1/orders/"+testOrderID+"/pay", `{"user_id":"alice"}`, nil); a.status != http.StatusOK || paid != 1 {
		t.Fatalf("/pay without a provider: got %d %s", a.status, a.body)
	}
	body := intentEvent("evt_1", testOrderID, 1250, "usd")
	if a := call(demo, "POST", webhookPath, body, signed(body, webhookSecret, time.Now())); a.status != http.StatusNotFound {
		t.Fatalf("the webhook without a secret: got %d %s", a.status, a.body)
	}
}
