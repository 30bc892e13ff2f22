package handler

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
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

var roomEventStreams atomic.Int64

func (h *Handler) queueEvents(c *gin.Context) {
	if roomEventStreams.Add(1) > roomEventsMaxStreams {
		roomEventStreams.Add(-1)
		h.writeError(c, &rateLimited{retryAfter: liveBusyRetry})
		return
	}
	defer roomEventStreams.Add(-1)
	v, ok := h.roomItem(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	ticket := c.Param("ticket")
	t, err := h.cfg.Rooms.Status(ctx, v, ticket) // a bad ticket is a plain JSON error
	if err != nil {
		h.writeError(c, err)
		return
	}
	end := time.Now().Add(roomEventsMaxStream)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-liveMargin).Before(end) {
		end = dl.Add(-liveMargin)
	}
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
		if v, err = h.shop.ItemView(ctx, v.ID); err == nil {
			t, err = h.cfg.Rooms.Status(ctx, v, ticket)
		}
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
