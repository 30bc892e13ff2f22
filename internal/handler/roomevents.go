package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/rooms"
)

// The Server-Sent Events form of a ticket's status (docs/API.md, "Waiting room"):
// a `status` event, then another each poll_after_ms (at least
// roomEventsMinGap), until the state is final or the stream's time is up;
// the client reconnects (retry: 1000) or falls back to polling. Each stream
// holds a connection and a goroutine, so a process serves at most
// roomEventsMaxStreams at once: past it 429, and polling is the answer.
const (
	roomEventsMaxStreams = 10_000
	roomEventsMaxStream  = time.Minute
	roomEventsMinGap     = 500 * time.Millisecond
)

// roomEventsPath is the stream's route: frame gives it its own time.
const roomEventsPath = "/api/v1/items/:id/queue/:ticket/events"

var roomEventStreams atomic.Int64

func (h *Handler) queueEvents(c *gin.Context) {
	if roomEventStreams.Add(1) > roomEventsMaxStreams {
		roomEventStreams.Add(-1)
		h.writeError(c, &rateLimited{retryAfter: liveBusyRetry})
		return
	}
	defer roomEventStreams.Add(-1)
	ctx := c.Request.Context()
	ticket := c.Param("ticket")
	// The first read, as a poll: one Redis budget for its steps.
	first, cancel := h.eventBudget(ctx)
	c.Request = c.Request.WithContext(first)
	v, ok := h.roomItem(c)
	var t *rooms.Ticket
	var err error
	if ok {
		t, err = h.cfg.Rooms.Status(first, v, ticket) // a bad ticket is a plain JSON error
	}
	cancel()
	c.Request = c.Request.WithContext(ctx)
	if !ok {
		return
	}
	if err != nil {
		h.writeError(c, err)
		return
	}
	end := time.Now().Add(roomEventsMaxStream)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-liveMargin).Before(end) {
		end = dl.Add(-liveMargin)
	}
	// The server's write timeout (SECKILL_REQUEST_TIMEOUT + 10 s) would cut
	// the connection before the minute: this stream sets its own.
	_ = http.NewResponseController(c.Writer).SetWriteDeadline(end.Add(liveMargin))
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-store")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	w := c.Writer
	_, _ = w.WriteString("retry: 1000\n\n")
	for {
		b, _ := json.Marshal(t)
		_, _ = w.WriteString("event: status\ndata: " + string(b) + "\n\n")
		w.Flush()
		if t.PollAfterMS == 0 {
			return // final
		}
		gap := max(time.Duration(t.PollAfterMS)*time.Millisecond, roomEventsMinGap)
		if time.Now().Add(gap).After(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		step, cancel := h.eventBudget(ctx)
		if v, err = h.itemViewIn(step, v.ID); err == nil {
			t, err = h.cfg.Rooms.Status(step, v, ticket)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b, _ := json.Marshal(errorBody{Error: errorDetail{Code: ErrorCode(err), Message: "the ticket could not be read; reconnect or poll"}})
			_, _ = w.WriteString("event: problem\ndata: " + string(b) + "\n\n")
			w.Flush()
			return
		}
	}
}

// eventBudget bounds one event's reads as a poll's (RoomRedisBudget).
func (h *Handler) eventBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.cfg.RoomRedisBudget <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, h.cfg.RoomRedisBudget)
}
