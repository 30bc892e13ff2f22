package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The console's order view (issue 35): an order paid through the payment
// provider's webhook shows its status, the payment as recorded (amount,
// outcome) and its events in order; an unknown id says so.
func TestConsoleShowsAnOrder(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	const secret = "whsec_console_test_0123456789"
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.StripeWebhookSecret = secret })
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "lamp", "stock": 3, "price_cents": 1250}, true, nil)
	var it apptest.Item
	r.JSON(t, &it)
	r, err := c.PlaceOrder(it.ID, "nina", "")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("order: %v %d %s", err, r.Status, r.Body)
	}
	var o apptest.Order
	r.JSON(t, &o)
	body := fmt.Sprintf(`{"id":"evt_console_1","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded",`+
		`"data":{"object":{"id":"pi_1","object":"payment_intent","amount":1250,"amount_received":1250,"currency":"usd","status":"succeeded",`+
		`"metadata":{"order_id":%q}}}}`, o.ID)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: time.Now()})
	if r := c.Must(t, "POST", "/api/v1/payments/stripe", body, false, map[string]string{"Stripe-Signature": sp.Header}); r.Status != http.StatusOK {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}

	tb := br.tab(t)
	tb.do("open the console", chromedp.Navigate(c.Base+"/admin/"))
	signIn(tb, c)
	tb.do("look up the order", setValue("#order-id", o.ID), click("#order-form button[type=submit]"))
	tb.wait("the order view", `!document.getElementById("order-view").hidden`)
	if got := tb.text("#o-status"); got != "paid" {
		t.Errorf("status %q, want paid", got)
	}
	if got := tb.text("#o-user"); got != "nina" {
		t.Errorf("user %q, want nina", got)
	}
	pays := tb.rows("#o-pay-rows tr")
	if len(pays) != 1 || pays[0][0] != "evt_console_1" || pays[0][2] != "12.50 USD" || pays[0][3] != "paid" {
		t.Errorf("payments %q, want evt_console_1, 12.50 USD, paid", pays)
	}
	var types []string
	for _, row := range tb.rows("#o-ev-rows tr") {
		types = append(types, row[1])
	}
	if strings.Join(types, ",") != "created,paid" {
		t.Errorf("events %v, want created,paid", types)
	}

	tb.do("look up an unknown order", setValue("#order-id", "01a23bd8-0000-7000-8000-000000000000"), click("#order-form button[type=submit]"))
	tb.wait("the refusal", `document.getElementById("order-error").textContent === "No such order."`)
	tb.clean()
}
