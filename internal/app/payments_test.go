package app_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

const (
	stripeSecret    = "whsec_app_test_current_0123456789"
	stripeOldSecret = "whsec_app_test_previous_0123456789"
	priceCents      = 1250
)

// webhookEvent is a payment_intent.succeeded event's body.
func webhookEvent(id, order string, amount int64, currency string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded",`+
		`"data":{"object":{"id":"pi_%s","object":"payment_intent","amount":%d,"amount_received":%d,"currency":%q,"status":"succeeded",`+
		`"metadata":{"order_id":%q}}}}`, id, id, amount, amount, currency, order)
}

// webhookAnswer is the webhook's 200.
type webhookAnswer struct {
	Outcome   string `json:"outcome"`
	Duplicate bool   `json:"duplicate"`
	Reason    string `json:"reason"`
}

// postWebhook signs body with secret (stripe-go's test helper) and posts it.
func postWebhook(t *testing.T, c *apptest.Client, body, secret string) apptest.Response {
	t.Helper()
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: time.Now()})
	return c.Must(t, "POST", "/api/v1/payments/stripe", body, false, map[string]string{"Stripe-Signature": sp.Header, "Content-Type": "application/json"})
}

func wantWebhook(t *testing.T, r apptest.Response, outcome string, dup bool) webhookAnswer {
	t.Helper()
	var a webhookAnswer
	if r.Status != http.StatusOK {
		t.Fatalf("webhook: got %d %s, want 200 %s", r.Status, r.Body, outcome)
	}
	r.JSON(t, &a)
	if a.Outcome != outcome || a.Duplicate != dup {
		t.Fatalf("webhook: got %s, want outcome %s duplicate %v", r.Body, outcome, dup)
	}
	return a
}

// paymentItem creates an item priced priceCents.
func paymentItem(t *testing.T, c *apptest.Client) int64 {
	t.Helper()
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "paid item", "stock": 10, "strategy": "lock", "price_cents": priceCents}, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create item: %d %s", r.Status, r.Body)
	}
	var it apptest.Item
	r.JSON(t, &it)
	return it.ID
}

func buyPriced(t *testing.T, c *apptest.Client, item int64, user string) string {
	t.Helper()
	r, err := c.PlaceOrder(item, user, "")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("order of %s: %v %d %s", user, err, r.Status, r.Body)
	}
	var o apptest.Order
	r.JSON(t, &o)
	return o.ID
}

func apiOrderStatus(t *testing.T, c *apptest.Client, id string) string {
	t.Helper()
	var o apptest.Order
	c.Must(t, "GET", "/api/v1/orders/"+id, nil, false, nil).JSON(t, &o)
	return o.Status
}

// countEvents counts the order's outbox events of type typ.
func countEvents(t *testing.T, st *store.Store, order, typ string) int {
	t.Helper()
	evs, err := st.OrderEvents(context.Background(), order)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// The whole service with a webhook secret (two, rotating), on each
// backend: the buyer's /pay is refused; a forged event changes nothing; a
// wrong amount, a wrong currency and an unknown order are rejected; the
// right payment, signed with either secret, pays the order once (one paid
// event in the outbox, however often it is redelivered); a payment for a
// cancelled, expired or overdue order is refund_due with its event.
func TestStripeWebhookPaysOrders(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		clock := &movedClock{}
		_, c := apptest.Start(t, b, func(cfg *app.Config) {
			cfg.StripeWebhookSecret = stripeOldSecret + ", " + stripeSecret
			cfg.PaymentTimeout = time.Hour
			cfg.Now = clock.Now
		})
		st, err := store.New(b.DB(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		item := paymentItem(t, c)
		paid, cancelled, expired, overdue := buyPriced(t, c, item, "payer"), buyPriced(t, c, item, "canceller"), buyPriced(t, c, item, "late"), buyPriced(t, c, item, "slow")

		r, _ := c.SettleOrder(paid, "pay", map[string]string{"user_id": "payer"}, nil)
		if r.Status != http.StatusForbidden || r.ErrorCode() != "payment_by_provider" {
			t.Fatalf("buyer's /pay: got %d %s, want 403 payment_by_provider", r.Status, r.Body)
		}
		if r := postWebhook(t, c, webhookEvent("evt_forged", paid, priceCents, "usd"), "whsec_forged"); r.Status != http.StatusBadRequest || r.ErrorCode() != "signature_invalid" {
			t.Fatalf("forged: got %d %s", r.Status, r.Body)
		}
		wantWebhook(t, postWebhook(t, c, webhookEvent("evt_low", paid, priceCents-1, "usd"), stripeSecret), "rejected", false)
		wantWebhook(t, postWebhook(t, c, webhookEvent("evt_eur", paid, priceCents, "eur"), stripeSecret), "rejected", false)
		wantWebhook(t, postWebhook(t, c, webhookEvent("evt_nobody", "0190a0c2-0000-7000-8000-00000000dead", priceCents, "usd"), stripeSecret), "rejected", false)
		if s := apiOrderStatus(t, c, paid); s != "created" {
			t.Fatalf("after /pay, a forged and rejected payments the order is %s", s)
		}

		ok := webhookEvent("evt_ok", paid, priceCents, "usd")
		wantWebhook(t, postWebhook(t, c, ok, stripeOldSecret), "paid", false)
		if s := apiOrderStatus(t, c, paid); s != "paid" {
			t.Fatalf("after its payment the order is %s", s)
		}
		for i := 0; i < 3; i++ { // Stripe redelivers, with either secret
			wantWebhook(t, postWebhook(t, c, ok, []string{stripeSecret, stripeOldSecret}[i%2]), "paid", true)
		}
		if n := countEvents(t, st, paid, store.EventPaid); n != 1 {
			t.Fatalf("the paid order has %d paid events, want 1", n)
		}

		if r, _ := c.SettleOrder(cancelled, "cancel", map[string]string{"user_id": "canceller"}, nil); r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		a := wantWebhook(t, postWebhook(t, c, webhookEvent("evt_cancelled", cancelled, priceCents, "usd"), stripeSecret), "refund_due", false)
		if a.Reason != "the order is cancelled" {
			t.Fatalf("reason %q", a.Reason)
		}
		clock.Set(2 * time.Hour) // past the payment deadline
		if r, _ := c.SettleOrder(expired, "cancel", map[string]string{"user_id": "late"}, nil); r.Status != http.StatusOK {
			t.Fatalf("cancel the overdue order: %d %s", r.Status, r.Body)
		}
		a = wantWebhook(t, postWebhook(t, c, webhookEvent("evt_expired", expired, priceCents, "usd"), stripeSecret), "refund_due", false)
		if a.Reason != "the order expired" {
			t.Fatalf("reason %q", a.Reason)
		}
		// Overdue, whether or not the sweeper expired it meanwhile.
		wantWebhook(t, postWebhook(t, c, webhookEvent("evt_overdue", overdue, priceCents, "usd"), stripeSecret), "refund_due", false)
		for _, id := range []string{cancelled, expired, overdue} {
			if n := countEvents(t, st, id, store.EventRefundDue); n != 1 {
				t.Fatalf("order %s has %d refund_due events, want 1", id, n)
			}
			if n := countEvents(t, st, id, store.EventPaid); n != 0 {
				t.Fatalf("order %s was paid", id)
			}
			if s := apiOrderStatus(t, c, id); s == "paid" {
				t.Fatalf("order %s is paid", id)
			}
		}
		wantWebhook(t, postWebhook(t, c, webhookEvent("evt_expired", expired, priceCents, "usd"), stripeSecret), "refund_due", true)
		if n := countEvents(t, st, expired, store.EventRefundDue); n != 1 {
			t.Fatalf("a redelivered refund_due wrote another event: %d", n)
		}
		ignored := `{"id":"evt_other","object":"event","type":"charge.refunded","data":{"object":{"id":"ch_1","object":"charge"}}}`
		wantWebhook(t, postWebhook(t, c, ignored, stripeSecret), "ignored", false)
		r = c.Must(t, "GET", "/metrics", nil, true, nil)
		for _, want := range []string{`seckill_payment_webhooks_total{outcome="duplicate"} 4`, `seckill_payment_webhooks_total{outcome="rejected"} 3`,
			`seckill_payment_webhooks_total{outcome="refund_due"} 3`, `seckill_payment_webhooks_total{outcome="signature_invalid"} 1`,
			`seckill_order_transitions_total{strategy="lock",to="paid"} 1`} {
			if !strings.Contains(string(r.Body), want) {
				t.Errorf("metrics lack %s:\n%s", want, grepLines(string(r.Body), "payment_webhooks"))
			}
		}
	})
}

// Without a webhook secret (the embedded demo) the buyer's /pay pays and
// the webhook is 404.
func TestBuyerPaysWithoutProvider(t *testing.T) {
	_, c := apptest.Start(t, testenv.Embedded(t))
	item := paymentItem(t, c)
	id := buyPriced(t, c, item, "demo")
	if r := postWebhook(t, c, webhookEvent("evt_1", id, priceCents, "usd"), stripeSecret); r.Status != http.StatusNotFound {
		t.Fatalf("webhook without a secret: got %d %s", r.Status, r.Body)
	}
	if r, _ := c.SettleOrder(id, "pay", map[string]string{"user_id": "demo"}, nil); r.Status != http.StatusOK {
		t.Fatalf("buyer's /pay: got %d %s", r.Status, r.Body)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The webhook's settings are read and checked: a list with an empty
// secret, a blank one or a currency that is no ISO code refuses to start.
func TestPaymentSettings(t *testing.T) {
	t.Parallel()
	parse := func(vars map[string]string) (app.Config, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return app.ParseConfig(fs, nil, env(vars))
	}
	cfg, err := parse(map[string]string{"SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_a, whsec_b", "SECKILL_CURRENCY": "EUR"})
	if err != nil || cfg.StripeWebhookSecret != "whsec_a, whsec_b" || cfg.Currency != "EUR" {
		t.Fatalf("got %q %q %v", cfg.StripeWebhookSecret, cfg.Currency, err)
	}
	if cfg, err := parse(nil); err != nil || cfg.Currency != app.DefaultCurrency || app.DefaultCurrency != "usd" || cfg.StripeWebhookSecret != "" {
		t.Fatalf("defaults: %q %q %v", cfg.Currency, cfg.StripeWebhookSecret, err)
	}
	for _, bad := range []map[string]string{
		{"SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_a,,whsec_b"},
		{"SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_a,"},
		{"SECKILL_STRIPE_WEBHOOK_SECRET": "  "},
		{"SECKILL_CURRENCY": "dollars"},
		{"SECKILL_CURRENCY": "u$d"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
