package handler

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// adminItem is the admin view of an item.
type adminItemJSON struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	PriceCents int64      `json:"price_cents"`
	Stock      int64      `json:"stock"`
	Sold       int64      `json:"sold"`
	Remaining  int64      `json:"remaining"`
	Strategy   string     `json:"strategy"`
	StartsAt   *time.Time `json:"starts_at"`
	EndsAt     *time.Time `json:"ends_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func adminView(it *stock.Item) adminItemJSON {
	return adminItemJSON{ID: it.ID, Name: it.Name, PriceCents: it.PriceCents, Stock: it.Stock, Sold: it.Sold,
		Remaining: it.Remaining(), Strategy: it.Strategy, StartsAt: it.StartsAt, EndsAt: it.EndsAt,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

type publicItemJSON struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	PriceCents int64      `json:"price_cents"`
	Remaining  int64      `json:"remaining"`
	StartsAt   *time.Time `json:"starts_at"`
	EndsAt     *time.Time `json:"ends_at"`
}

type createItemRequest struct {
	Name       *string    `json:"name"`
	Stock      *int64     `json:"stock"`
	PriceCents int64      `json:"price_cents"`
	Strategy   string     `json:"strategy"`
	StartsAt   *time.Time `json:"starts_at"`
	EndsAt     *time.Time `json:"ends_at"`
}

func (h *Handler) createItem(c *gin.Context) {
	var req createItemRequest
	if !h.decode(c, &req) {
		return
	}
	if req.Name == nil || req.Stock == nil {
		h.writeError(c, stock.Invalidf("name and stock are required"))
		return
	}
	it, err := h.shop.CreateItem(c.Request.Context(), stock.NewItem{Name: *req.Name, Stock: *req.Stock, PriceCents: req.PriceCents,
		Strategy: req.Strategy, StartsAt: req.StartsAt, EndsAt: req.EndsAt})
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.Header("Location", "/api/v1/admin/items/"+strconv.FormatInt(it.ID, 10))
	c.JSON(http.StatusCreated, adminView(it))
}

func (h *Handler) adminItem(c *gin.Context) {
	it, ok := h.item(c)
	if ok {
		c.JSON(http.StatusOK, adminView(it))
	}
}

func (h *Handler) publicItem(c *gin.Context) {
	it, ok := h.item(c)
	if ok {
		c.JSON(http.StatusOK, publicItemJSON{ID: it.ID, Name: it.Name, PriceCents: it.PriceCents,
			Remaining: it.Remaining(), StartsAt: it.StartsAt, EndsAt: it.EndsAt})
	}
}

func (h *Handler) item(c *gin.Context) (*stock.Item, bool) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	it, err := h.shop.Item(c.Request.Context(), id)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	return it, true
}

type setStockRequest struct {
	Stock *int64 `json:"stock"`
}

func (h *Handler) setStock(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	var req setStockRequest
	if !h.decode(c, &req) {
		return
	}
	if req.Stock == nil {
		h.writeError(c, stock.Invalidf("stock is required"))
		return
	}
	it, err := h.shop.SetStock(c.Request.Context(), id, *req.Stock)
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, adminView(it))
}
