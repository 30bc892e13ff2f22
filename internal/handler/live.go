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
	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/rooms"
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
	// liveShareAge: the views of one item share its event, read once (by
	// one of them) and reused by the others for this long, so an item
	// costs two reads a second however many views watch it. Under
	// liveInterval, so each view still gets a new event every tick.
	liveShareAge = liveInterval / 2
	// liveTallyGrace: an item's refusal counts are kept this long after
	// its last live view closed, for the view's reconnection (EventSource
	// retries a second after the stream ends; a tab in the background or
	// a slow network takes longer).
	liveTallyGrace = time.Minute
	// liveMaxStreams caps the live views open at once in this process
	// (each holds a connection and a goroutine); past it a view is refused
	// 429 rate_limited, to retry after liveBusyRetry.
	liveMaxStreams = 64
	liveBusyRetry  = 5 * time.Second
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
	// WaitingRoom is the item's waiting room, as the admin item view
	// shows it; absent without one.
	WaitingRoom *rooms.AdminView `json:"waiting_room,omitempty"`
}

// liveItem streams the live view of an item (text/event-stream).
func (h *Handler) liveItem(c *gin.Context) {
	closeStream, ok := h.tally.openStream()
	if !ok {
		h.writeError(c, &rateLimited{retryAfter: liveBusyRetry})
		return
	}
	defer closeStream()
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
	var prevRate *float64
	failing := false // logged once per run of failed reads, not each second
	tick := time.NewTicker(liveInterval)
	defer tick.Stop()
	for {
		ev, err := h.sharedLiveEvent(ctx, it.ID)
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
			switch {
			case !prevAt.IsZero() && ev.At.After(prevAt):
				rate := float64(ev.Item.Sold-prevSold) / ev.At.Sub(prevAt).Seconds()
				prevRate = &rate
				prevSold, prevAt = ev.Item.Sold, ev.At
			case prevAt.IsZero():
				prevSold, prevAt = ev.Item.Sold, ev.At
			}
			ev.SoldPerSecond = prevRate // the same shared event again keeps the last rate
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

// sharedLiveEvent is the item's live event for one view: a copy of the one
// read less than liveShareAge ago for any view of the item, or of a new
// read, shared by the views that ask at once. The read does not end when
// the view that started it goes away; each view waits only its own ctx.
func (h *Handler) sharedLiveEvent(ctx context.Context, id int64) (*liveJSON, error) {
	if ev := h.tally.recent(id, time.Now()); ev != nil {
		cp := *ev
		// The counts are this moment's, not the shared read's (kept from
		// a view that closed a moment ago, say): they cost no read.
		cp.Rejections, cp.RejectionsSince = h.tally.counts(id)
		return &cp, nil
	}
	ch := h.tally.reads.DoChan(strconv.FormatInt(id, 10), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveMargin)
		defer cancel()
		ev, err := h.liveEvent(rctx, id)
		if err != nil {
			return nil, err
		}
		h.tally.keep(id, ev)
		return ev, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		cp := *r.Val.(*liveJSON)
		return &cp, nil
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
	if h.cfg.Rooms != nil {
		if ev.WaitingRoom, err = h.cfg.Rooms.Admin(ctx, it); err != nil {
			return nil, err
		}
	}
	ev.Rejections, ev.RejectionsSince = h.tally.counts(id)
	return ev, nil
}

// orderTally counts refused orders by item and error code, for the items
// a live view watches and only while one does: the order path then pays one
// atomic load, and the counts are bounded by the items watched. A view's
// stream ends every request timeout or so and its page reconnects a second
// later, so an item's counts outlive its last view by liveTallyGrace: the
// reconnected view goes on counting, not from zero.
//
// It also keeps what the live views share: the count of open views (capped
// at maxStreams) and each watched item's last event (see sharedLiveEvent).
type orderTally struct {
	tracked atomic.Int64 // len(items): items watched, or in their grace
	now     func() time.Time
	mu      sync.Mutex
	items   map[int64]*itemTally

	streams    atomic.Int64 // live views open, watching or not yet
	maxStreams int64
	reads      singleflight.Group // one live read per item at a time
}

type itemTally struct {
	watchers  int
	idleSince time.Time // when watchers last fell to 0
	since     time.Time
	codes     map[string]int64
	last      *liveJSON // the item's last event, shared by its views
}

func newOrderTally() *orderTally {
	return &orderTally{items: map[int64]*itemTally{}, maxStreams: liveMaxStreams, now: time.Now}
}

// openStream counts a live view in, unless maxStreams are open; the
// returned done counts it out.
func (t *orderTally) openStream() (done func(), ok bool) {
	if t.streams.Add(1) > t.maxStreams {
		t.streams.Add(-1)
		return nil, false
	}
	return func() { t.streams.Add(-1) }, true
}

// recent returns the item's last event if it was read less than
// liveShareAge before now.
func (t *orderTally) recent(id int64, now time.Time) *liveJSON {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it := t.items[id]; it != nil && it.last != nil && now.Sub(it.last.At) < liveShareAge {
		return it.last
	}
	return nil
}

// keep stores the item's last event while a view watches it.
func (t *orderTally) keep(id int64, ev *liveJSON) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it := t.items[id]; it != nil && (it.last == nil || ev.At.After(it.last.At)) {
		it.last = ev
	}
}

// watch starts counting the item's refusals (if no view did) until the
// returned stop is called by every view that called watch.
func (t *orderTally) watch(id int64) (stop func()) {
	t.mu.Lock()
	now := t.now()
	t.prune(now)
	it := t.items[id]
	if it == nil {
		it = &itemTally{since: now, codes: map[string]int64{}}
		t.items[id] = it
		t.tracked.Add(1)
	}
	it.watchers++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if it.watchers--; it.watchers == 0 {
			it.idleSince = t.now()
		}
		t.mu.Unlock()
	}
}

// prune forgets the items whose last view closed liveTallyGrace before
// now. The caller holds t.mu.
func (t *orderTally) prune(now time.Time) {
	for id, it := range t.items {
		if it.watchers == 0 && now.Sub(it.idleSince) >= liveTallyGrace {
			delete(t.items, id)
			t.tracked.Add(-1)
		}
	}
}

func (t *orderTally) watched(id int64) bool {
	if t.tracked.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	it := t.items[id]
	if it != nil && it.watchers == 0 && t.now().Sub(it.idleSince) >= liveTallyGrace {
		t.prune(t.now()) // its grace is over: the order path is one atomic load again
		return false
	}
	return it != nil
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
	if h.tally.tracked.Load() == 0 {
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
