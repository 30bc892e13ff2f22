package handler

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

type orderJSON struct {
	ID        string    `json:"id"`
	ItemID    int64     `json:"item_id"`
	UserID    string    `json:"user_id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func orderView(o *stock.Order) orderJSON {
	return orderJSON{ID: o.ID, ItemID: o.ItemID, UserID: o.UserID, Status: o.Status,
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
	var req placeOrderRequest
	if !h.decode(c, &req) {
		return
	}
	if req.UserID == nil {
		h.writeError(c, stock.Invalidf("user_id is required"))
		return
	}
	o, replayed, err := h.shop.PlaceOrder(c.Request.Context(), stock.OrderRequest{ItemID: id, UserID: *req.UserID,
		IdempotencyKey: c.GetHeader("Idempotency-Key")})
	if err != nil {
		h.writeError(c, err)
		return
	}
	if replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.Header("Location", "/api/v1/orders/"+o.ID)
	c.JSON(http.StatusCreated, orderView(o))
}

func (h *Handler) getOrder(c *gin.Context) {
	o, err := h.shop.Order(c.Request.Context(), c.Param("id"))
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}
