package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill/internal/stock"
)

// Payments from the provider (docs/API.md, "Payments from the provider"):
// POST /api/v1/payments/stripe takes Stripe's webhook events, verified by
// stripe-go's webhook package against each of the configured signing
// secrets (several during a rotation), and records the payments they name
// through Payments.

// Payments records a verified payment (*shop.Service implements it).
type Payments interface {
	// RecordPayment records p once by its event id and applies it to its
	// order; currency is the one prices are in.
	RecordPayment(ctx context.Context, p stock.Payment, currency string) (stock.PaymentRecord, error)
}

// DefaultCurrency is Config.Currency's default.
const DefaultCurrency = "usd"

// CodeSignatureInvalid answers a webhook whose Stripe-Signature does not
// verify, or is older than the tolerance; CodePaymentByProvider a buyer's
// /pay while the provider's webhook records payments.
const (
	CodeSignatureInvalid  = "signature_invalid"
	CodePaymentByProvider = "payment_by_provider"
)

// errPaymentByProvider refuses a buyer's /pay while a webhook secret is set.
var errPaymentByProvider = errors.New("payments are recorded by the payment provider's webhook")

// Webhook outcomes besides the stock.Payment* ones (the metric's labels).
const (
	webhookIgnored          = "ignored"
	webhookDuplicate        = "duplicate"
	webhookSignatureInvalid = "signature_invalid"
	webhookInvalid          = "invalid"
	webhookError            = "error"
	webhookPending          = "pending"
)

// Limits of what a payment event may carry (payment_events' columns).
const (
	maxEventIDLen  = 255
	maxOrderRefLen = 500 // Stripe's limit on a metadata value
	maxCurrencyLen = 16
)

// webhookAnswer is the 200 answer to a webhook event.
type webhookAnswer struct {
	Received  bool   `json:"received"`
	EventID   string `json:"event_id"`
	Outcome   string `json:"outcome"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// paymentsOn reports whether the provider's webhook records payments.
func (h *Handler) paymentsOn() bool { return len(h.cfg.StripeWebhookSecrets) > 0 }

func (h *Handler) stripeWebhook(c *gin.Context) {
	if !h.paymentsOn() || h.cfg.Payments == nil {
		abort(c, http.StatusNotFound, CodeNotFound, "no payment provider is configured (SECKILL_STRIPE_WEBHOOK_SECRET)")
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.cfg.Metrics.PaymentWebhook(webhookInvalid)
			abort(c, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return
		}
		abort(c, http.StatusBadRequest, CodeInvalidRequest, "could not read the request body")
		return
	}
	ev, err := h.verifyStripe(body, c.GetHeader("Stripe-Signature"))
	if err != nil {
		var sig *signatureError
		if errors.As(err, &sig) {
			h.cfg.Metrics.PaymentWebhook(webhookSignatureInvalid)
			abort(c, http.StatusBadRequest, CodeSignatureInvalid, err.Error())
			return
		}
		h.cfg.Metrics.PaymentWebhook(webhookInvalid)
		abort(c, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	}
	p, ok, err := stripePayment(ev)
	if err != nil {
		h.cfg.Metrics.PaymentWebhook(webhookInvalid)
		abort(c, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	}
	if !ok {
		h.cfg.Metrics.PaymentWebhook(webhookIgnored)
		c.JSON(http.StatusOK, webhookAnswer{Received: true, EventID: ev.ID, Outcome: webhookIgnored})
		return
	}
	p.ReceivedAt = h.paymentNow()
	ctx := c.Request.Context()
	if h.cfg.PaymentTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.cfg.PaymentTimeout)
		defer cancel()
	}
	rec, err := h.cfg.Payments.RecordPayment(ctx, p, h.currency())
	if err != nil {
		label := webhookError
		if errors.Is(err, stock.ErrOrderPending) {
			label = webhookPending // 409: the provider retries
		}
		h.cfg.Metrics.PaymentWebhook(label)
		if ctx.Err() != nil && !errors.Is(err, stock.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", stock.ErrUnavailable, err)
		}
		h.writeError(c, err)
		return
	}
	label := rec.Outcome
	if rec.Duplicate {
		label = webhookDuplicate
	} else if rec.Outcome != stock.PaymentPaid {
		h.log.WarnContext(ctx, "payment not taken as its order's: "+rec.Outcome, "event", p.EventID, "type", p.Type,
			"order", p.OrderID, "amount", p.Amount, "currency", p.Currency, "reason", rec.Reason)
	}
	h.cfg.Metrics.PaymentWebhook(label)
	c.JSON(http.StatusOK, webhookAnswer{Received: true, EventID: p.EventID, Outcome: rec.Outcome,
		Duplicate: rec.Duplicate, Reason: rec.Reason})
}

// signatureError is a Stripe-Signature that does not verify.
type signatureError struct{ err error }

func (e *signatureError) Error() string { return "Stripe-Signature: " + e.err.Error() }
func (e *signatureError) Unwrap() error { return e.err }

// verifyStripe verifies body's Stripe-Signature header against each
// secret in turn and parses the event. A signature none verifies, or one
// outside the tolerance, is a *signatureError.
func (h *Handler) verifyStripe(body []byte, header string) (stripe.Event, error) {
	opts := webhook.ConstructEventOptions{Tolerance: h.cfg.StripeTolerance, IgnoreAPIVersionMismatch: true}
	var last error
	for _, secret := range h.cfg.StripeWebhookSecrets {
		ev, err := webhook.ConstructEventWithOptions(body, header, secret, opts)
		switch {
		case err == nil:
			return ev, nil
		case errors.Is(err, webhook.ErrNoValidSignature):
			last = err // perhaps the next secret's
			continue
		case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader), errors.Is(err, webhook.ErrTooOld):
			return stripe.Event{}, &signatureError{err} // the same for every secret
		default:
			// Verified, but the body is no event.
			return stripe.Event{}, fmt.Errorf("the event does not parse: %w", err)
		}
	}
	return stripe.Event{}, &signatureError{last}
}

// stripePayment reads the payment a verified event tells of; ok is false
// for an event of another type (or a checkout session not paid yet).
func stripePayment(ev stripe.Event) (p stock.Payment, ok bool, err error) {
	if ev.ID == "" || len(ev.ID) > maxEventIDLen || !printableASCII(ev.ID) {
		return p, false, errors.New("the event has no valid id")
	}
	p.EventID, p.Type = ev.ID, string(ev.Type)
	if ev.Created > 0 {
		p.PaidAt = time.Unix(ev.Created, 0)
	}
	var meta map[string]string
	switch ev.Type {
	case stripe.EventTypePaymentIntentSucceeded:
		var pi stripe.PaymentIntent
		if err := decodeObject(ev, &pi); err != nil {
			return p, false, err
		}
		meta, p.Amount, p.Currency = pi.Metadata, pi.AmountReceived, string(pi.Currency)
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		var cs stripe.CheckoutSession
		if err := decodeObject(ev, &cs); err != nil {
			return p, false, err
		}
		if cs.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
			// A delayed payment method: async_payment_succeeded follows.
			return p, false, nil
		}
		meta, p.Amount, p.Currency = cs.Metadata, cs.AmountTotal, string(cs.Currency)
	default:
		return p, false, nil
	}
	p.OrderID = meta["order_id"]
	if len(p.OrderID) > maxOrderRefLen {
		return p, false, fmt.Errorf("metadata.order_id is longer than %d bytes", maxOrderRefLen)
	}
	if len(p.Currency) > maxCurrencyLen || !printableASCII(p.Currency) {
		return p, false, errors.New("the event's currency is no currency code")
	}
	return p, true, nil
}

func decodeObject(ev stripe.Event, dst any) error {
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return fmt.Errorf("the %s event has no data.object", ev.Type)
	}
	if err := json.Unmarshal(ev.Data.Raw, dst); err != nil {
		return fmt.Errorf("the %s event's data.object does not parse: %w", ev.Type, err)
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *Handler) currency() string {
	if h.cfg.Currency == "" {
		return DefaultCurrency
	}
	return strings.ToLower(h.cfg.Currency)
}

// paymentNow is Config.PaymentNow's time.
func (h *Handler) paymentNow() time.Time {
	if h.cfg.PaymentNow != nil {
		return h.cfg.PaymentNow()
	}
	return time.Now()
}
