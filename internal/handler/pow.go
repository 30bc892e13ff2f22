package handler

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/rooms"
)

// The proof-of-work of joining a room (docs/API.md "Waiting room", proof-of-work;
// internal/room/pow.go): off unless Config.RoomChallenge and
// Config.RoomPoW are set; joinQueue checks the proof.

// PoWIssue issues a challenge for user to join item's room: the string, the
// zero bits a solution needs, and when it stops being good.
type PoWIssue func(itemID int64, user string) (challenge string, bits int, expires time.Time, err error)

type challengeJSON struct {
	Challenge string `json:"challenge"`
	Bits      int    `json:"bits"`
	// ExpiresAt is RFC 3339 in UTC with milliseconds, always three digits
	// (a challenge expires to the millisecond; a fixed width keeps a HEAD's
	// Content-Length its GET's).
	ExpiresAt string `json:"expires_at"`
}

const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// queueChallenge answers a proof-of-work challenge for the user (the
// user_id query parameter, or the token's user in JWT mode) to join the
// item's room. It keeps nothing and reads no Redis for a roomed item (the
// challenge is signed); proof-of-work off is 404.
func (h *Handler) queueChallenge(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	var queryUser *string
	u, ok, err := queryValue(c, "user_id")
	if err != nil {
		h.writeError(c, err)
		return
	}
	if ok {
		queryUser = &u
	}
	user, err := h.roomUser(c, queryUser)
	if err != nil {
		h.writeError(c, err)
		return
	}
	if h.cfg.Rooms == nil || !h.cfg.Rooms.Roomed(id) {
		// Unknown item (404) or an item without a room (409).
		if _, err := h.shop.ItemView(c.Request.Context(), id); err != nil {
			h.writeError(c, err)
			return
		}
		h.writeError(c, rooms.ErrNoWaitingRoom)
		return
	}
	if h.cfg.RoomChallenge == nil || h.cfg.RoomPoW == nil {
		abort(c, http.StatusNotFound, CodeNotFound, "proof-of-work is off: join without one")
		return
	}
	ch, bits, expires, err := h.cfg.RoomChallenge(id, user)
	if err != nil {
		h.writeError(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, challengeJSON{Challenge: ch, Bits: bits, ExpiresAt: expires.UTC().Format(rfc3339Millis)})
}
