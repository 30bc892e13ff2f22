package handler

import (
	"net/http"
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
	f, err := listFilter(c)
	if err != nil {
		h.writeError(c, err)
		return
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

// listFilter reads the admin list's query: ?status=, ?limit= and ?before=.
func listFilter(c *gin.Context) (stock.ItemFilter, error) {
	status, ok, err := queryValue(c, "status")
	if err != nil {
		return stock.ItemFilter{}, err
	}
	if ok && status == "" {
		return stock.ItemFilter{}, stock.Invalidf("status must not be empty; leave it out to list every item")
	}
	limit, err := queryNumber(c, "limit", stock.MaxListLimit, 50)
	if err != nil {
		return stock.ItemFilter{}, err
	}
	before, err := queryNumber(c, "before", 1<<63-1, 0)
	return stock.ItemFilter{Status: status, Limit: int(limit), Before: before}, err
}

// consoleRoutes serves the admin console on the admin engine and the sale
// page on the public one, each with the assets (scripts, style sheet) and an
// index at / saying what is where.
func (h *Handler) consoleRoutes(pub, admin *gin.Engine) {
	sale := web.NewSalePage(h.tokenMode())
	get(pub, "/sale/:id", func(c *gin.Context) {
		if _, err := pathID(c); err != nil {
			h.writeError(c, err)
			return
		}
		sale.ServeHTTP(c.Writer, c.Request)
	})
	console := web.NewConsolePage(admin == pub)
	get(admin, "/admin/", func(c *gin.Context) { console.ServeHTTP(c.Writer, c.Request) })
	index := web.NewIndexPage(admin == pub, true)
	get(pub, "/", func(c *gin.Context) { index.ServeHTTP(c.Writer, c.Request) })
	assets := func(c *gin.Context) {
		if !web.Asset(c.Writer, c.Request, c.Param("file")) {
			abort(c, http.StatusNotFound, CodeNotFound, "no such asset")
		}
	}
	get(pub, "/assets/:file", assets)
	if admin != pub {
		get(admin, "/assets/:file", assets)
		adminIndex := web.NewIndexPage(true, false)
		get(admin, "/", func(c *gin.Context) { adminIndex.ServeHTTP(c.Writer, c.Request) })
	}
}
