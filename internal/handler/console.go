package handler

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/web"
)

// listItemJSON is an item in the admin list: the admin view and its sale
// status.
type listItemJSON struct {
	adminItemJSON
	Status string `json:"status"`
}

type itemPageJSON struct {
	Items []listItemJSON `json:"items"`
	// NextBefore is the before of the next page; null on the last.
	NextBefore *int64 `json:"next_before"`
}

// listItems serves a page of items, newest first: ?status= (upcoming,
// on_sale, sold_out, ended), ?limit= (1 to 200, default 50) and ?before=
// (the next_before of the previous page).
func (h *Handler) listItems(c *gin.Context) {
	f := stock.ItemFilter{Status: c.Query("status"), Limit: 50}
	if raw, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > stock.MaxListLimit {
			h.writeError(c, stock.Invalidf("limit must be an integer from 1 to %d", stock.MaxListLimit))
			return
		}
		f.Limit = n
	}
	if raw, ok := c.GetQuery("before"); ok {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 {
			h.writeError(c, stock.Invalidf("before must be a positive item id"))
			return
		}
		f.Before = n
	}
	page, err := h.shop.ListItems(c.Request.Context(), f)
	if err != nil {
		h.writeError(c, err)
		return
	}
	now := time.Now()
	out := itemPageJSON{Items: make([]listItemJSON, len(page.Items))}
	for i, it := range page.Items {
		out.Items[i] = listItemJSON{adminItemJSON: adminView(it), Status: it.SaleStatus(now)}
	}
	if page.NextBefore != 0 {
		out.NextBefore = &page.NextBefore
	}
	c.JSON(http.StatusOK, out)
}

// consoleRoutes serves the admin console on the admin engine and the sale
// page on the public one, each with the assets (scripts, style sheet).
func (h *Handler) consoleRoutes(pub, admin *gin.Engine) {
	sale := web.NewSalePage(h.cfg.UserJWTSecret != nil)
	pub.GET("/sale/:id", func(c *gin.Context) {
		if _, err := pathID(c); err != nil {
			h.writeError(c, err)
			return
		}
		sale.ServeHTTP(c.Writer, c.Request)
	})
	console := web.NewConsolePage(admin == pub)
	admin.GET("/admin/", func(c *gin.Context) { console.ServeHTTP(c.Writer, c.Request) })
	assets := func(c *gin.Context) {
		if !web.Asset(c.Writer, c.Request, c.Param("file")) {
			abort(c, http.StatusNotFound, CodeNotFound, "no such asset")
		}
	}
	pub.GET("/assets/:file", assets)
	if admin != pub {
		admin.GET("/assets/:file", assets)
	}
}
