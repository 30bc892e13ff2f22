package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// The live view of an item is a stream of Server-Sent Events: one "stats"
// event a second. A stream ends before the request timeout would cut it (and
// after liveMaxStream at most); its first line asks the client to reconnect
// a second later, which EventSource does by itself.
const (
	liveInterval  = time.Second
	liveMaxStream = time.Minute
	// liveMargin is kept between a stream's end and the request deadline,
	// for the last event's reads.
	liveMargin = 1500 * time.Millisecond
)

// liveJSON is one event of the live view.
type liveJSON struct {
	At   time.Time    `json:"at"`
	Item listItemJSON `json:"item"`
	// SoldPerSecond is the rate at which the database's sold grew since
	// the stream's previous event; null on a stream's first event.
	SoldPerSecond *float64 `json:"sold_per_second"`
	// Rejections counts this instance's refused orders of the item by
	// error code, since RejectionsSince (when the first live view of the
	// item opened; the counts are kept while one is open).
	Rejections      map[string]int64 `json:"rejections"`
	RejectionsSince time.Time        `json:"rejections_since"`
	// Queue is the lua-async queue; absent for other strategies.
	Queue *queueJSON `json:"queue,omitempty"`
}

// liveItem streams the live view of an item (text/event-stream).
func (h *Handler) liveItem(c *gin.Context) {
	it, ok := h.item(c) // a bad or unknown id is a plain JSON error
	if !ok {
		return
	}
	stop := h.tally.watch(it.ID)
	defer stop()
	ctx := c.Request.Context()
	end := time.Now().Add(liveMaxStream)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-liveMargin).Before(end) {
		end = dl.Add(-liveMargin)
	}
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-store")
	c.Header("X-Accel-Buffering", "no") // no proxy buffering of the stream
	c.Status(http.StatusOK)
	w := c.Writer
	_, _ = w.WriteString("retry: 1000\n\n")
	var prevSold int64
	var prevAt time.Time
	failing := false // logged once per run of failed reads, not each second
	tick := time.NewTicker(liveInterval)
	defer tick.Stop()
	for {
		ev, err := h.liveEvent(ctx, it.ID)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				h.log.WarnContext(ctx, "live view: item not read", "item", it.ID, "err", err)
			}
			failing = true
			b, _ := json.Marshal(errorBody{Error: errorDetail{Code: ErrorCode(err), Message: "the item could not be read; retrying"}})
			_, _ = w.WriteString("event: problem\ndata: " + string(b) + "\n\n")
		} else {
			failing = false
			if !prevAt.IsZero() {
				rate := float64(ev.Item.Sold-prevSold) / ev.At.Sub(prevAt).Seconds()
				ev.SoldPerSecond = &rate
			}
			prevSold, prevAt = ev.Item.Sold, ev.At
			b, _ := json.Marshal(ev)
			_, _ = w.WriteString("event: stats\ndata: " + string(b) + "\n\n")
		}
		w.Flush()
		if time.Now().Add(liveInterval).After(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (h *Handler) liveEvent(ctx context.Context, id int64) (*liveJSON, error) {
	it, err := h.shop.Item(ctx, id)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ev := &liveJSON{At: now, Item: listItemJSON{adminItemJSON: adminView(it), Status: it.SaleStatus(now)}}
	if it.Strategy.Queued() {
		q, err := h.shop.AsyncStats(ctx, id)
		if err != nil {
			return nil, err
		}
		ev.Queue = queueView(q)
	}
	ev.Rejections, ev.RejectionsSince = h.tally.counts(id)
	return ev, nil
}

// orderTally counts refused orders by item and error code, for the items
// a live view watches and only while one does: the order path then pays one
// atomic load, and the counts are bounded by the items watched.
type orderTally struct {
	watchers atomic.Int64 // open live views of any item
	mu       sync.Mutex
	items    map[int64]*itemTally
}

type itemTally struct {
	watchers int
	since    time.Time
	codes    map[string]int64
}

func newOrderTally() *orderTally { return &orderTally{items: map[int64]*itemTally{}} }

// watch starts counting the item's refusals (if no view did) until the
// returned stop is called by every view that called watch.
func (t *orderTally) watch(id int64) (stop func()) {
	t.mu.Lock()
	it := t.items[id]
	if it == nil {
		it = &itemTally{since: time.Now(), codes: map[string]int64{}}
		t.items[id] = it
	}
	it.watchers++
	t.mu.Unlock()
	t.watchers.Add(1)
	return func() {
		t.watchers.Add(-1)
		t.mu.Lock()
		if it.watchers--; it.watchers == 0 {
			delete(t.items, id)
		}
		t.mu.Unlock()
	}
}

func (t *orderTally) watched(id int64) bool {
	if t.watchers.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.items[id] != nil
}

func (t *orderTally) record(id int64, code string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it := t.items[id]; it != nil {
		it.codes[code]++
	}
}

func (t *orderTally) counts(id int64) (map[string]int64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int64{}
	it := t.items[id]
	if it == nil {
		return out, time.Now()
	}
	for k, v := range it.codes {
		out[k] = v
	}
	return out, it.since
}

// tallyOrders wraps the order route: an order on a watched item that is
// refused is counted by its error code, read from the answer.
func (h *Handler) tallyOrders(c *gin.Context) {
	if h.tally.watchers.Load() == 0 {
		c.Next()
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || !h.tally.watched(id) {
		c.Next()
		return
	}
	rec := &codeRecorder{ResponseWriter: c.Writer}
	c.Writer = rec
	c.Next()
	c.Writer = rec.ResponseWriter
	if rec.Status() >= 400 {
		var e errorBody
		code := "unknown"
		if json.Unmarshal(rec.body, &e) == nil && e.Error.Code != "" {
			code = e.Error.Code
		}
		h.tally.record(id, code)
	}
}

// codeRecorder keeps the start of an answer's body, where an error's code is.
type codeRecorder struct {
	gin.ResponseWriter
	body []byte
}

const codeRecorderMax = 1024

func (r *codeRecorder) Write(b []byte) (int, error) {
	if room := codeRecorderMax - len(r.body); room > 0 {
		r.body = append(r.body, b[:min(room, len(b))]...)
	}
	return r.ResponseWriter.Write(b)
}

func (r *codeRecorder) WriteString(s string) (int, error) { return r.Write([]byte(s)) }
