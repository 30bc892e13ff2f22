package handler

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// adminItemJSON is the admin view of an item.
type adminItemJSON struct {
	ID         int64              `json:"id"`
	Name       string             `json:"name"`
	PriceCents int64              `json:"price_cents"`
	Stock      int64              `json:"stock"`
	Sold       int64              `json:"sold"`
	Remaining  int64              `json:"remaining"`
	Strategy   stock.StrategyName `json:"strategy"`
	Buckets    int                `json:"buckets"`
	StartsAt   *time.Time         `json:"starts_at"`
	EndsAt     *time.Time         `json:"ends_at"`
	CreatedAt  time.Time          `json:"created_at"`
	UpdatedAt  time.Time          `json:"updated_at"`
	// Queue is the lua-async queue of the item; absent for other strategies.
	Queue *queueJSON `json:"queue,omitempty"`
	// WaitingRoom is the item's waiting room; absent without one.
	WaitingRoom *rooms.AdminView `json:"waiting_room,omitempty"`
}

// queueJSON shows a lua-async queue: orders admitted and not yet in the
// database, how many of those a writer holds, parked dead letters, and
// how long the oldest has waited.
type queueJSON struct {
	Queued      int64 `json:"queued"`
	Unacked     int64 `json:"unacked"`
	DeadLetters int64 `json:"dead_letters"`
	OldestAgeMS int64 `json:"oldest_age_ms"`
}

func queueView(q stock.AsyncStats) *queueJSON {
	return &queueJSON{Queued: q.Queued, Unacked: q.Unacked, DeadLetters: q.DeadLetters, OldestAgeMS: q.OldestAge.Milliseconds()}
}

func adminView(it *stock.Item) adminItemJSON {
	return adminItemJSON{ID: it.ID, Name: it.Name, PriceCents: it.PriceCents, Stock: it.Stock, Sold: it.Sold,
		Remaining: it.Remaining(), Strategy: it.Strategy, Buckets: it.Buckets, StartsAt: it.StartsAt, EndsAt: it.EndsAt,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

type publicItemJSON struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	PriceCents  int64           `json:"price_cents"`
	Remaining   int64           `json:"remaining"`
	StartsAt    *time.Time      `json:"starts_at"`
	EndsAt      *time.Time      `json:"ends_at"`
	WaitingRoom *rooms.Settings `json:"waiting_room,omitempty"`
}

type createItemRequest struct {
	Name       *string            `json:"name"`
	Stock      *int64             `json:"stock"`
	PriceCents int64              `json:"price_cents"`
	Strategy   stock.StrategyName `json:"strategy"`
	Buckets    *int               `json:"buckets"` // absent: 1
	StartsAt   *time.Time         `json:"starts_at"`
	EndsAt     *time.Time         `json:"ends_at"`
	// WaitingRoom, when given, sets up the item's waiting room.
	WaitingRoom *waitingRoomRequest `json:"waiting_room"`
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
	buckets := 1
	if req.Buckets != nil {
		if err := stock.ValidateBuckets(*req.Buckets); err != nil {
			h.writeError(c, err)
			return
		}
		buckets = *req.Buckets
	}
	if req.WaitingRoom != nil {
		if h.cfg.Rooms == nil {
			h.writeError(c, stock.Invalidf("waiting rooms are not available on this server"))
			return
		}
		if err := req.WaitingRoom.change().Validate(true); err != nil {
			h.writeError(c, err)
			return
		}
	}
	in := stock.NewItem{Name: *req.Name, Stock: *req.Stock, PriceCents: req.PriceCents,
		Strategy: req.Strategy, Buckets: buckets, StartsAt: req.StartsAt, EndsAt: req.EndsAt}
	var it *stock.Item
	var err error
	if req.WaitingRoom != nil {
		// The item and its room are one transaction: both, or neither.
		it, err = h.cfg.Rooms.CreateItem(c.Request.Context(), in, req.WaitingRoom.change())
	} else {
		it, err = h.shop.CreateItem(c.Request.Context(), in)
	}
	if err != nil {
		h.writeError(c, err)
		return
	}
	v := adminView(it)
	if req.WaitingRoom != nil {
		if v.WaitingRoom, err = h.cfg.Rooms.Admin(c.Request.Context(), it); err != nil {
			h.log.WarnContext(c.Request.Context(), "waiting room set up, its counters not read", "item", it.ID, "err", err)
		}
	}
	audit := []any{"item", it.ID, "before", nil, "after", adminView(it)}
	if req.WaitingRoom != nil {
		audit = append(audit, "waiting_room", req.WaitingRoom.logValue())
	}
	h.audit(c, "create_item", audit...)
	c.Header("Location", "/api/v1/admin/items/"+strconv.FormatInt(it.ID, 10))
	c.JSON(http.StatusCreated, v)
}

func (h *Handler) adminItem(c *gin.Context) {
	it, ok := h.item(c)
	if !ok {
		return
	}
	v := adminView(it)
	if it.Strategy.Queued() {
		q, err := h.shop.AsyncStats(c.Request.Context(), it.ID)
		if err != nil {
			h.writeError(c, err)
			return
		}
		v.Queue = queueView(q)
	}
	if h.cfg.Rooms != nil {
		wr, err := h.cfg.Rooms.Admin(c.Request.Context(), it)
		if err != nil {
			h.writeError(c, err)
			return
		}
		v.WaitingRoom = wr
	}
	c.JSON(http.StatusOK, v)
}

type deadLetterJSON struct {
	Entry  string    `json:"entry"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Order  orderJSON `json:"order"`
}

// maxDeadLetters caps one listing of an item's dead letters.
const maxDeadLetters = 10000

// deadLetters lists the item's dead-letter stream (?limit=, default 100).
func (h *Handler) deadLetters(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	limit, err := queryNumber(c, "limit", maxDeadLetters, 100)
	if err != nil {
		h.writeError(c, err)
		return
	}
	dl, err := h.shop.DeadLetters(c.Request.Context(), id, limit)
	if err != nil {
		h.writeError(c, err)
		return
	}
	out := make([]deadLetterJSON, len(dl))
	for i, d := range dl {
		out[i] = deadLetterJSON{Entry: d.Entry, Reason: d.Reason, At: d.At, Order: orderView(&d.Order)}
	}
	c.JSON(http.StatusOK, gin.H{"dead_letters": out})
}

// requeueDeadLetters moves the item's dead letters back to its queue.
func (h *Handler) requeueDeadLetters(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	n, err := h.shop.RequeueDeadLetters(c.Request.Context(), id)
	if err != nil {
		h.writeError(c, err)
		return
	}
	h.audit(c, "requeue_dead_letters", "item", id, "requeued", n)
	c.JSON(http.StatusOK, gin.H{"requeued": n})
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
	before, it, err := h.shop.SetStock(c.Request.Context(), id, *req.Stock)
	if err != nil {
		h.writeError(c, err)
		return
	}
	h.audit(c, "set_stock", "item", id, "before", slog.GroupValue(slog.Int64("stock", before.Stock), slog.Int64("sold", before.Sold)),
		"after", slog.GroupValue(slog.Int64("stock", it.Stock), slog.Int64("sold", it.Sold)))
	c.JSON(http.StatusOK, adminView(it))
}

// audit logs one admin change: who made it, what, and the state before and
// after. It is logged at Info whatever the level, so it is never filtered
// below warnings.
func (h *Handler) audit(c *gin.Context, action string, args ...any) {
	args = append([]any{"who", "admin " + c.RemoteIP(), "action", action}, args...)
	h.log.Log(c.Request.Context(), slog.LevelInfo, "audit", args...)
}
