package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// passHeader carries an admitted ticket's pass on an order (docs/API.md).
const passHeader = "Seckill-Pass"

// Ticket states (GET /api/v1/items/{id}/queue/{ticket}).
const (
	stateWaiting  = "waiting"
	stateAdmitted = "admitted"
	stateExpired  = "expired"
	stateUsed     = "used"
	stateSoldOut  = "sold_out"
	// stateHeld: sold out while a unit may come back (an unpaid order):
	// not final, the page polls on slowly. The harness counts it as the
	// sell-out learned and stops the user (its orders are never paid, so
	// the units stay held until they expire).
	stateHeld  = "held"
	stateEnded = "ended"
)

// finalState reports a state after which the page stops polling.
func finalState(s string) bool {
	return s == stateUsed || s == stateExpired || s == stateSoldOut || s == stateEnded
}

// ticketView is the answer of a join or a status poll.
type ticketView struct {
	Ticket        string `json:"ticket"`
	Number        int64  `json:"number"`
	State         string `json:"state"`
	Drawn         bool   `json:"drawn"`
	Position      int64  `json:"position"`
	Ahead         int64  `json:"ahead"`
	ETASeconds    int64  `json:"eta_seconds"`
	Remaining     int    `json:"remaining"`
	Pass          string `json:"pass"`
	PassExpiresAt string `json:"pass_expires_at"`
	PollAfterMS   int64  `json:"poll_after_ms"`
}

// roomView is an item's waiting_room object: the public fields, and the
// admin counters (zero in the public view).
type roomView struct {
	AdmitPerSecond int    `json:"admit_per_second"`
	PassTTLSeconds int    `json:"pass_ttl_seconds"`
	Lottery        bool   `json:"lottery"`
	Commitment     string `json:"commitment"`
	Phase          string `json:"phase"`
	Paused         bool   `json:"paused"`
	Closed         bool   `json:"closed"`
	Tickets        int64  `json:"tickets"`
	Waiting        int64  `json:"waiting"`
	Admitted       int64  `json:"admitted"`
	Used           int64  `json:"used"`
	Expired        int64  `json:"expired"`
	Live           int64  `json:"live"`
}

// drawDoc is GET /api/v1/items/{id}/draw: room.PublicDraw, and "lottery":
// false when the pre-queue is served in ticket order.
type drawDoc struct {
	room.PublicDraw
	Lottery *bool `json:"lottery"`
}

// call is one room request's answer: HTTP status (0: no answer), error
// code, when it was sent and answered, and the transport error.
type call struct {
	status     int
	code       string
	start, end time.Time
	err        error
}

// pick is the instance for a buyer's next room request: the instances of
// Config.URLs in turn (a buyer's join and polls land on different ones,
// as behind a load balancer), or the one base.
func (c *client) pick() string {
	if len(c.orders) == 0 {
		return c.base
	}
	return c.orders[(c.next.Add(1)-1)%uint64(len(c.orders))]
}

func (c *client) roomCall(ctx context.Context, method, path string, body any, out any) call {
	return c.roomCallAt(ctx, c.base, method, path, body, out)
}

func (c *client) roomCallAt(ctx context.Context, base, method, path string, body any, out any) call {
	r := call{start: time.Now()}
	st, b, err := c.doAt(ctx, base, method, path, body, nil)
	r.end, r.status = time.Now(), st
	if err != nil {
		r.err = err
		return r
	}
	if st == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			r.err = fmt.Errorf("decode %s: %w: %.200s", path, err, b)
		}
		return r
	}
	var e apiError
	_ = json.Unmarshal(b, &e)
	r.code = e.Error.Code
	if r.code == "" {
		r.err = httpErr(method+" "+path, st, b)
	}
	return r
}

func itemPath(id int64) string { return "/api/v1/items/" + strconv.FormatInt(id, 10) }

// join is POST /api/v1/items/{id}/queue, on the next instance.
func (c *client) join(ctx context.Context, itemID int64, user string, out *ticketView) call {
	return c.roomCallAt(ctx, c.pick(), http.MethodPost, itemPath(itemID)+"/queue", map[string]string{"user_id": user}, out)
}

// ticketStatus is GET /api/v1/items/{id}/queue/{ticket}, on the next instance.
func (c *client) ticketStatus(ctx context.Context, itemID int64, ticket string, out *ticketView) call {
	return c.roomCallAt(ctx, c.pick(), http.MethodGet, itemPath(itemID)+"/queue/"+url.PathEscape(ticket), nil, out)
}

// draw is GET /api/v1/items/{id}/draw.
func (c *client) draw(ctx context.Context, itemID int64) (drawDoc, error) {
	var d drawDoc
	r := c.roomCall(ctx, http.MethodGet, itemPath(itemID)+"/draw", nil, &d)
	if r.err == nil && r.status != http.StatusOK {
		r.err = fmt.Errorf("draw: HTTP %d %s", r.status, r.code)
	}
	return d, r.err
}

// publicRoom is the waiting_room of GET /api/v1/items/{id} (nil: none).
func (c *client) publicRoom(ctx context.Context, itemID int64) (*roomView, error) {
	var v struct {
		Room *roomView `json:"waiting_room"`
	}
	r := c.roomCall(ctx, http.MethodGet, itemPath(itemID), nil, &v)
	if r.err == nil && r.status != http.StatusOK {
		r.err = fmt.Errorf("item view: HTTP %d %s", r.status, r.code)
	}
	return v.Room, r.err
}

// adminRoom is the waiting_room of GET /api/v1/admin/items/{id} (nil: none).
func (c *client) adminRoom(ctx context.Context, itemID int64) (*roomView, error) {
	st, b, err := c.do(ctx, http.MethodGet, "/api/v1/admin/items/"+strconv.FormatInt(itemID, 10), nil, c.admin())
	if err != nil {
		return nil, fmt.Errorf("admin item: %w", err)
	}
	if st != http.StatusOK {
		return nil, httpErr("admin item", st, b)
	}
	var v struct {
		Room *roomView `json:"waiting_room"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("admin item: decode: %w", err)
	}
	return v.Room, nil
}

// admittedAt is when the room admitted a ticket, from its pass expiry and
// the pass lifetime, and whether the expiry had sub-second precision. A
// pass expiry rounded down to the second still gives the second of the
// admission exactly, the lifetime being whole seconds.
func admittedAt(passExpiresAt string, ttl time.Duration) (time.Time, bool, error) {
	t, err := time.Parse(time.RFC3339Nano, passExpiresAt)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("pass_expires_at %q: %w", passExpiresAt, err)
	}
	return t.Add(-ttl), t.Nanosecond() != 0, nil
}
