package handler

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/stock"
)

type orderJSON struct {
	ID        string     `json:"id"`
	ItemID    int64      `json:"item_id"`
	UserID    string     `json:"user_id"`
	Status    string     `json:"status"`
	Reason    string     `json:"reason,omitempty"`
	ExpiresAt *time.Time `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func orderView(o *stock.Order) orderJSON {
	return orderJSON{ID: o.ID, ItemID: o.ItemID, UserID: o.UserID, Status: o.Status, Reason: o.Reason, ExpiresAt: o.ExpiresAt,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

type placeOrderRequest struct {
	UserID *string `json:"user_id"`
}

func (h *Handler) placeOrder(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	// The address is limited before any work, the user once known.
	if err := h.limit(c, h.cfg.IPLimit, "ip", c.RemoteIP()); err != nil {
		h.writeError(c, err)
		return
	}
	user := ""
	if h.tokenMode() {
		if user, err = h.tokenUser(c); err != nil {
			h.writeError(c, err)
			return
		}
	}
	var req placeOrderRequest
	if !h.decode(c, &req) {
		return
	}
	if user == "" { // without tokens the body names the user; with them it is ignored
		if req.UserID == nil {
			h.writeError(c, stock.Invalidf("user_id is required"))
			return
		}
		user = *req.UserID
	}
	key, err := singleHeader(c, "Idempotency-Key")
	if err != nil {
		h.writeError(c, err)
		return
	}
	oreq := stock.OrderRequest{ItemID: id, UserID: user, IdempotencyKey: key}
	if err := stock.ValidateOrderRequest(oreq); err != nil {
		h.writeError(c, err)
		return
	}
	// A roomed item's order needs a pass: checked in the process, first.
	adm, ok := h.admit(c, oreq)
	if !ok {
		return
	}
	// The per-user limit guards the path that can sell. An item this process
	// knows is sold out, and a user it knows has bought (without a key, which
	// must find its order), are refused from memory, cheaper than the limiter.
	// A pass-less retry's database read (replay) always waits for it: a
	// fresh key is free to make.
	if adm.Replay() || (!h.shop.KnownSoldOut(id) && (oreq.IdempotencyKey != "" || !h.shop.KnownPurchased(id, user))) {
		if err := h.limit(c, h.cfg.UserLimit, "user", user); err != nil {
			h.writeError(c, err)
			return
		}
	}
	if err := adm.Confirm(c.Request.Context()); err != nil {
		h.writeError(c, err)
		return
	}
	oreq.Pass = adm.Passed()
	o, replayed, err := h.shop.PlaceOrder(c.Request.Context(), oreq)
	if err != nil {
		h.writeError(c, adm.Refused(c.Request.Context(), err))
		return
	}
	if replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	adm.Done(c.Request.Context(), replayed)
	c.Header("Location", "/api/v1/orders/"+o.ID)
	status := http.StatusCreated
	if o.Status == stock.StatusPending {
		status = http.StatusAccepted // lua-async: queued, written soon
	}
	c.Data(status, jsonContentType, marshalOrder(orderView(o)))
}

func (h *Handler) getOrder(c *gin.Context) {
	user := ""
	if h.tokenMode() {
		var err error
		if user, err = h.tokenUser(c); err != nil {
			h.writeError(c, err)
			return
		}
	}
	o, err := h.shop.Order(c.Request.Context(), c.Param("id"))
	if err == nil && user != "" && o.UserID != user {
		err = stock.ErrNotFound // another user's order does not exist for this one
	}
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}

type settleOrderRequest struct {
	UserID *string `json:"user_id"`
}

// payOrder is the buyer's own payment: only without a payment provider
// (the embedded demo); with one, payments come from its webhook.
func (h *Handler) payOrder(c *gin.Context) {
	if h.paymentsOn() {
		h.writeError(c, errPaymentByProvider)
		return
	}
	h.settleOrder(c, h.shop.PayOrder)
}

func (h *Handler) cancelOrder(c *gin.Context) { h.settleOrder(c, h.shop.CancelOrder) }

// settleOrder serves pay and cancel: the user is the bearer token's in JWT
// mode (the body may then be empty and its user_id is ignored), the body's
// user_id otherwise. Another user's order is 404, as for GET.
func (h *Handler) settleOrder(c *gin.Context, settle func(ctx context.Context, id, userID string) (*stock.Order, error)) {
	user := ""
	if h.tokenMode() {
		var err error
		if user, err = h.tokenUser(c); err != nil {
			h.writeError(c, err)
			return
		}
	}
	var req settleOrderRequest
	if !h.decodeOptional(c, &req, user != "") {
		return
	}
	if user == "" {
		if req.UserID == nil {
			h.writeError(c, stock.Invalidf("user_id is required"))
			return
		}
		user = *req.UserID
	}
	o, err := settle(c.Request.Context(), c.Param("id"), user)
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}

// limit takes one unit of key's budget on l (nil: off). A refusal is a
// *rateLimited; a Redis failure is unavailability.
func (h *Handler) limit(c *gin.Context, l *ratelimit.Limiter, name, key string) error {
	if l == nil {
		return nil
	}
	wait, err := l.Allow(c.Request.Context(), name+":"+key)
	if err != nil {
		return fmt.Errorf("%s rate limit: %w: %w", name, stock.ErrUnavailable, err)
	}
	if wait > 0 {
		h.cfg.Metrics.RateLimited(name)
		return &rateLimited{retryAfter: wait}
	}
	return nil
}
