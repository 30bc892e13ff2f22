package handler

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// ItemViewMaxAge is the max-age a browser or CDN may keep the public item
// view: one second, so a refresh storm before a sale reaches the service at
// most once a second per cache, and a buyer sees a sell-out within about a
// second (plus the service's own bound, shop.ViewMaxAge).
const ItemViewMaxAge = 1

var itemViewCacheControl = "public, max-age=" + strconv.Itoa(ItemViewMaxAge)

// encodedView is a view's JSON body and ETag, made once per view: the shop
// hands out the same *stock.ItemView until it reads the item again.
type encodedView struct {
	view *stock.ItemView
	room *rooms.Settings // the waiting room shown, nil without one
	body []byte
	etag string
}

// itemViewCache keeps each item's last encoded view.
type itemViewCache struct{ m sync.Map } // int64 -> *encodedView

func (c *itemViewCache) encode(v *stock.ItemView, wr *rooms.Settings) *encodedView {
	if e, ok := c.m.Load(v.ID); ok && e.(*encodedView).view == v && sameRoom(e.(*encodedView).room, wr) {
		return e.(*encodedView)
	}
	body, _ := json.Marshal(publicItemJSON{ID: v.ID, Name: v.Name, PriceCents: v.PriceCents,
		Remaining: v.Remaining, StartsAt: v.StartsAt, EndsAt: v.EndsAt, WaitingRoom: wr}) // plain fields: cannot fail
	h := fnv.New64a()
	_, _ = h.Write(body)
	e := &encodedView{view: v, room: wr, body: body, etag: `"` + strconv.FormatUint(h.Sum64(), 36) + `"`}
	c.m.Store(v.ID, e)
	return e
}

// publicItem serves the public item view from the shop's memory, with an
// ETag and a short max-age; a matching If-None-Match gets 304.
func (h *Handler) publicItem(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	v, err := h.shop.ItemView(c.Request.Context(), id)
	if err != nil {
		h.writeError(c, err)
		return
	}
	var wr *rooms.Settings
	if h.cfg.Rooms != nil {
		wr = h.cfg.Rooms.Public(v.ID, v.StartsAt)
	}
	e := h.views.encode(v, wr)
	c.Header("ETag", e.etag)
	c.Header("Cache-Control", itemViewCacheControl)
	if etagMatches(c.Request.Header.Values("If-None-Match"), e.etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, jsonContentType, e.body)
}

func sameRoom(a, b *rooms.Settings) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// etagMatches reports whether If-None-Match names etag (weak comparison,
// RFC 9110 13.1.2: a W/ prefix is ignored) or is "*". The header is a list,
// so its lines are one list too (RFC 9110 5.3).
func etagMatches(lines []string, etag string) bool {
	for _, line := range lines {
		for _, t := range strings.Split(line, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
