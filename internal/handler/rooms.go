package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// The waiting room's routes (docs/API.md and docs/DESIGN.md, "Waiting room").

// Rooms runs the waiting rooms; *rooms.Service implements it.
type Rooms interface {
	// Roomed reports whether the item's orders need a pass (from memory).
	Roomed(itemID int64) bool
	// Admit is an order's passage through the room, from its pass
	// (rooms.Admission says how the order path uses it).
	Admit(req stock.OrderRequest, pass string) (rooms.Admission, error)
	// LearnUnproven reloads the rooms for a join of an item whose room is
	// not known here, at most once every 100 ms.
	LearnUnproven(ctx context.Context, itemID int64)
	// CreateItem creates an item with its room in one transaction.
	CreateItem(ctx context.Context, in stock.NewItem, c rooms.Change) (*stock.Item, error)
	Join(ctx context.Context, v *stock.ItemView, user string) (*rooms.Ticket, error)
	Status(ctx context.Context, v *stock.ItemView, ticket string) (*rooms.Ticket, error)
	Draw(ctx context.Context, itemID int64) (*rooms.Draw, error)
	Set(ctx context.Context, itemID int64, c rooms.Change) error
	Delete(ctx context.Context, itemID int64) error
	// Admin is the admin views' waiting_room (nil without a room).
	Admin(ctx context.Context, it *stock.Item) (*rooms.AdminView, error)
	// Public is the public view's waiting_room, from memory (nil without).
	Public(itemID int64, startsAt *time.Time) *rooms.Settings
}

var _ Rooms = (*rooms.Service)(nil)

// PassHeader carries an admitted buyer's pass on an order of a roomed item.
const PassHeader = "Seckill-Pass"

// PoWCheck verifies a join's proof-of-work (challenge and nonce as the
// client sent them) for item and user; nil error: solved. Config.RoomPoW
// nil: proof-of-work is off.
type PoWCheck func(itemID int64, user, challenge, nonce string) error

var (
	// errPoWRequired: proof-of-work is on and the join carries none.
	errPoWRequired = errors.New("proof-of-work required")
	// errPoWInvalid: the join's proof-of-work does not verify.
	errPoWInvalid = errors.New("proof-of-work invalid")
)

// waitingRoomRequest is a room's settings in item create and PUT
// .../waiting-room; absent fields keep their value (or default).
type waitingRoomRequest struct {
	AdmitPerSecond *int  `json:"admit_per_second"`
	PassTTLSeconds *int  `json:"pass_ttl_seconds"`
	Lottery        *bool `json:"lottery"`
	Paused         *bool `json:"paused"`
}

// logValue shows the fields given, for the audit log.
func (r *waitingRoomRequest) logValue() slog.Value {
	var attrs []slog.Attr
	if r.AdmitPerSecond != nil {
		attrs = append(attrs, slog.Int("admit_per_second", *r.AdmitPerSecond))
	}
	if r.PassTTLSeconds != nil {
		attrs = append(attrs, slog.Int("pass_ttl_seconds", *r.PassTTLSeconds))
	}
	if r.Lottery != nil {
		attrs = append(attrs, slog.Bool("lottery", *r.Lottery))
	}
	if r.Paused != nil {
		attrs = append(attrs, slog.Bool("paused", *r.Paused))
	}
	return slog.GroupValue(attrs...)
}

func (r *waitingRoomRequest) change() rooms.Change {
	return rooms.Change{AdmitPerSecond: r.AdmitPerSecond, PassTTLSeconds: r.PassTTLSeconds, Lottery: r.Lottery, Paused: r.Paused}
}

type powJSON struct {
	Challenge string `json:"challenge"`
	Nonce     string `json:"nonce"`
}

type humanJSON struct {
	Token string `json:"token"`
}

type joinRequest struct {
	UserID *string    `json:"user_id"`
	PoW    *powJSON   `json:"pow"`
	Human  *humanJSON `json:"human"`
}

// roomUser is the request's user: the token's in JWT mode, else the body's
// user_id (req may be nil for a route without a body).
func (h *Handler) roomUser(c *gin.Context, bodyUser *string) (string, error) {
	if h.tokenMode() {
		user, err := h.tokenUser(c)
		if err != nil {
			return "", err
		}
		// The token is genuine, but its issuer's ids need not be ours: the
		// order path refuses the same sub with the same 400.
		if !stock.ValidUserID(user) {
			return "", stock.Invalidf("the token's sub must be 1 to %d printable ASCII characters", stock.MaxUserIDLen)
		}
		return user, nil
	}
	if bodyUser == nil {
		return "", stock.Invalidf("user_id is required")
	}
	if !stock.ValidUserID(*bodyUser) {
		return "", stock.Invalidf("user_id must be 1 to %d printable ASCII characters", stock.MaxUserIDLen)
	}
	return *bodyUser, nil
}

// roomBudget gives a room request's Redis steps one deadline,
// RoomRedisBudget from now: the item view's gate read, a rate limit and the
// room's call each wait at most the Redis timeout, so, in turn, a stalled
// Redis cost their sum (redteam #8: 2 s at the 1 s default); sharing it,
// the step after one that waited gets what is left and the request answers
// 503 within the one budget.
func (h *Handler) roomBudget(c *gin.Context) {
	if h.cfg.RoomRedisBudget <= 0 {
		return
	}
	if h.cfg.HumanCheck != nil { // a map write: only when it is used
		c.Set(roomBaseCtxKey, c.Request.Context())
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), h.cfg.RoomRedisBudget)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

// roomBaseCtxKey holds the request's context before roomBudget bounded it,
// for a step that is no Redis call (the human check).
const roomBaseCtxKey = "seckill.roomBase"

// roomItem is the public view of the path's item, for the room routes.
func (h *Handler) roomItem(c *gin.Context) (*stock.ItemView, bool) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	v, err := h.itemViewIn(c.Request.Context(), id)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	if h.cfg.Rooms == nil {
		h.writeError(c, rooms.ErrNoWaitingRoom)
		return nil, false
	}
	return v, true
}

// itemViewIn is the item's view, or, when ctx ran out before it was read
// (the room's Redis budget spent by a stalled gate), ErrUnavailable.
func (h *Handler) itemViewIn(ctx context.Context, id int64) (*stock.ItemView, error) {
	v, err := h.shop.ItemView(ctx, id)
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil) && !errors.Is(err, stock.ErrUnavailable) {
		return nil, fmt.Errorf("item view: %w: %w", stock.ErrUnavailable, err)
	}
	return v, err
}

// joinQueue gives the user a place in the item's line (or the one it has).
func (h *Handler) joinQueue(c *gin.Context) {
	limit := h.cfg.RoomIPLimit
	if limit == nil {
		limit = h.cfg.IPLimit
	}
	if limit != nil { // the key costs an address parse: only when it is used
		if err := h.limit(c, limit, "ip", "join:"+c.RemoteIP()); err != nil {
			h.writeError(c, err)
			return
		}
	}
	var req joinRequest
	if !h.decodeOptional(c, &req, h.tokenMode()) {
		return
	}
	user, err := h.roomUser(c, req.UserID)
	if err != nil {
		h.writeError(c, err)
		return
	}
	v, ok := h.roomItem(c)
	if !ok {
		return
	}
	if !h.cfg.Rooms.Roomed(v.ID) {
		// Its room may have been made through another instance a moment
		// ago (this one reloads every second): learn it before saying no.
		h.cfg.Rooms.LearnUnproven(c.Request.Context(), v.ID)
		if !h.cfg.Rooms.Roomed(v.ID) {
			h.writeError(c, rooms.ErrNoWaitingRoom)
			return
		}
	}
	if v.EndsAt != nil && !time.Now().Before(*v.EndsAt) {
		h.writeError(c, stock.ErrSaleEnded)
		return
	}
	if v.Remaining <= 0 {
		h.writeError(c, stock.ErrSoldOut)
		return
	}
	// Proof-of-work (off unless configured): after the cheap checks (nobody
	// solves a puzzle to learn the sale is over), before the join touches
	// Redis, so a refused proof changes nothing.
	if h.cfg.RoomPoW != nil {
		if req.PoW == nil {
			h.writeError(c, errPoWRequired)
			return
		}
		if err := h.cfg.RoomPoW(v.ID, user, req.PoW.Challenge, req.PoW.Nonce); err != nil {
			h.writeError(c, errors.Join(errPoWInvalid, err))
			return
		}
	}
	// The human check (off unless configured), last: it is a call to
	// another service. It has its own timeout, and the join's Redis step a
	// budget of its own after it.
	if h.cfg.HumanCheck != nil {
		base := c.Request.Context()
		if b, ok := c.Get(roomBaseCtxKey); ok {
			base = b.(context.Context)
		}
		token := ""
		if req.Human != nil {
			token = req.Human.Token
		}
		if err := h.cfg.HumanCheck(base, token, c.RemoteIP()); err != nil {
			h.writeError(c, err)
			return
		}
		if h.cfg.RoomRedisBudget > 0 {
			ctx, cancel := context.WithTimeout(base, h.cfg.RoomRedisBudget)
			defer cancel()
			c.Request = c.Request.WithContext(ctx)
		}
	}
	t, err := h.cfg.Rooms.Join(c.Request.Context(), v, user)
	if err != nil {
		h.writeError(c, err)
		return
	}
	noStore(c)
	c.Data(http.StatusOK, jsonContentType, marshalTicket(t))
}

// queueStatus is a ticket's state, place and (to its holder) pass.
func (h *Handler) queueStatus(c *gin.Context) {
	v, ok := h.roomItem(c)
	if !ok {
		return
	}
	t, err := h.cfg.Rooms.Status(c.Request.Context(), v, c.Param("ticket"))
	if err != nil {
		h.writeError(c, err)
		return
	}
	noStore(c)
	c.Data(http.StatusOK, jsonContentType, marshalTicket(t))
}

// roomDraw is the item's public draw document.
func (h *Handler) roomDraw(c *gin.Context) {
	v, ok := h.roomItem(c)
	if !ok {
		return
	}
	d, err := h.cfg.Rooms.Draw(c.Request.Context(), v.ID)
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

// setWaitingRoom sets up or changes the item's room.
func (h *Handler) setWaitingRoom(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	var req waitingRoomRequest
	if !h.decode(c, &req) {
		return
	}
	if h.cfg.Rooms == nil {
		h.writeError(c, rooms.ErrNoWaitingRoom)
		return
	}
	if err := h.cfg.Rooms.Set(c.Request.Context(), id, req.change()); err != nil {
		h.writeError(c, err)
		return
	}
	h.audit(c, "set_waiting_room", "item", id, "change", req.logValue())
	h.adminItem(c)
}

// deleteWaitingRoom turns the item's room off.
func (h *Handler) deleteWaitingRoom(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	if h.cfg.Rooms == nil {
		h.writeError(c, rooms.ErrNoWaitingRoom)
		return
	}
	if err := h.cfg.Rooms.Delete(c.Request.Context(), id); err != nil {
		h.writeError(c, err)
		return
	}
	h.audit(c, "delete_waiting_room", "item", id)
	c.Status(http.StatusNoContent)
}

// admit is the order's passage through the waiting room (rooms.Admit;
// rooms.NoRooms without rooms), or false once it has answered the refusal. The pass
// header is read as strictly whether or not the item has a room: given
// twice is 400, not a purchase with the first of the two.
func (h *Handler) admit(c *gin.Context, req stock.OrderRequest) (rooms.Admission, bool) {
	if h.cfg.Rooms == nil {
		return rooms.NoRooms, true
	}
	pass, err := singleHeader(c, PassHeader)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	a, err := h.cfg.Rooms.Admit(req, pass)
	if err != nil {
		h.writeError(c, err)
		return nil, false
	}
	return a, true
}

// noStoreValue is the Cache-Control of a ticket's answer, set as the
// canonical key's one shared value: a join and a poll are a waiting room's
// hot path, and c.Header canonicalizes the key and allocates the value
// each time. net/http copies the header map when it writes it, and nothing
// changes the slice.
var noStoreValue = []string{"no-store"}

// noStore marks the answer as not to be cached (a ticket's place and pass
// are the holder's, and change).
func noStore(c *gin.Context) { c.Writer.Header()["Cache-Control"] = noStoreValue }
