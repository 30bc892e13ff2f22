package handler

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// EventFeed reads the order events in delivery order: the admin feed
// (GET /api/v1/admin/events), readable with or without NATS.
type EventFeed interface {
	// EventsAfter returns up to limit events whose delivery sequence is
	// above after, in that order.
	EventsAfter(ctx context.Context, after int64, limit int) ([]store.Event, error)
	// OrderEvents returns one order's events, oldest first.
	OrderEvents(ctx context.Context, orderID string) ([]store.Event, error)
	// PaymentEvents returns the payments recorded for one order (the
	// provider's webhook events), oldest first.
	PaymentEvents(ctx context.Context, orderID string) ([]store.PaymentEvent, error)
}

// maxEventsPage caps one page of the admin feed.
const maxEventsPage = 1000

// eventJSON is one event of the feed: the body JetStream consumers get,
// plus its place in delivery order (the next page's ?after=).
type eventJSON struct {
	store.Event
	Cursor int64 `json:"cursor"`
}

type eventPageJSON struct {
	Events []eventJSON `json:"events"`
	// NextAfter is the ?after= of the next page: the last event's cursor,
	// or the request's own after when there was none (poll again later).
	NextAfter int64 `json:"next_after"`
}

// events serves a page of the feed: ?after= (default 0: from the
// beginning) and ?limit= (default 100, at most 1000).
func (h *Handler) events(c *gin.Context) {
	if h.cfg.Events == nil {
		h.writeError(c, fmt.Errorf("no event feed configured: %w", stock.ErrNotFound))
		return
	}
	var after int64
	if raw, ok, err := queryValue(c, "after"); err != nil {
		h.writeError(c, err)
		return
	} else if ok && raw != "0" {
		if after, err = queryNumber(c, "after", 1<<62, 0); err != nil {
			h.writeError(c, stock.Invalidf("after must be 0 or a cursor from a page's next_after (decimal digits, no sign or leading zero), got %q", raw))
			return
		}
	}
	limit, err := queryNumber(c, "limit", maxEventsPage, 100)
	if err != nil {
		h.writeError(c, err)
		return
	}
	ctx, cancel := h.eventsContext(c)
	defer cancel()
	evs, err := h.cfg.Events.EventsAfter(ctx, after, int(limit))
	if err != nil {
		h.writeError(c, err)
		return
	}
	out := eventPageJSON{Events: make([]eventJSON, len(evs)), NextAfter: after}
	for i, e := range evs {
		out.Events[i] = eventJSON{Event: e, Cursor: e.PubSeq}
		out.NextAfter = e.PubSeq
	}
	c.JSON(http.StatusOK, out)
}

// paymentJSON is one payment event recorded for an order.
type paymentJSON struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
}

type adminOrderJSON struct {
	Order    orderJSON     `json:"order"`
	Payments []paymentJSON `json:"payments"`
	Events   []store.Event `json:"events"`
}

// adminOrder shows one order with its payments and its events (the
// console's order view), whoever its user is.
func (h *Handler) adminOrder(c *gin.Context) {
	if h.cfg.Events == nil {
		h.writeError(c, fmt.Errorf("no event feed configured: %w", stock.ErrNotFound))
		return
	}
	ctx, cancel := h.eventsContext(c)
	defer cancel()
	id := c.Param("id")
	o, err := h.shop.Order(ctx, id)
	if err != nil {
		h.writeError(c, err)
		return
	}
	evs, err := h.cfg.Events.OrderEvents(ctx, id)
	if err != nil {
		h.writeError(c, err)
		return
	}
	pays, err := h.cfg.Events.PaymentEvents(ctx, id)
	if err != nil {
		h.writeError(c, err)
		return
	}
	out := adminOrderJSON{Order: orderView(o), Payments: make([]paymentJSON, len(pays)), Events: evs}
	if out.Events == nil {
		out.Events = []store.Event{}
	}
	for i, p := range pays {
		out.Payments[i] = paymentJSON{EventID: p.EventID, Type: p.Type, Amount: p.Amount, Currency: p.Currency,
			Outcome: p.Outcome, Reason: p.Reason, ReceivedAt: p.ReceivedAt}
	}
	c.JSON(http.StatusOK, out)
}

// eventsContext bounds a read of the events by Config.EventsTimeout (the
// app's SECKILL_DB_TIMEOUT), so a stalled database is a fast 503.
func (h *Handler) eventsContext(c *gin.Context) (context.Context, context.CancelFunc) {
	if h.cfg.EventsTimeout > 0 {
		return context.WithTimeout(c.Request.Context(), h.cfg.EventsTimeout)
	}
	return context.WithCancel(c.Request.Context())
}
