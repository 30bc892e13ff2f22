package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// RoomConfig is the waiting room and its crowd in ModeRoom: Config.Users
// (W) users join before the opening, Late more after it; each polls its
// ticket as the sale page does (waiting poll_after_ms after each answer),
// buys with its pass as soon as it reads "admitted", and stops at a final
// state. Config.Concurrency bounds the requests in flight: the users are
// entries in a timer heap, not goroutines.
type RoomConfig struct {
	Late      int           // users who join after the opening (their tickets are served FIFO)
	Rate      int           // the room's admit_per_second R. Default 500
	PassTTL   time.Duration // the pass lifetime, whole seconds (5s to 1h). Default 60s
	OpenIn    time.Duration // starts_at is about this far after the item's creation. Default 3s + 1ms a user
	NoLottery bool          // "lottery": false (the pre-queue is served in ticket order)
	// PassFactor is the service's SECKILL_ROOM_PASS_FACTOR (live passes
	// <= factor x remaining stock). Default 1; R10 holds factor 1 only.
	PassFactor float64
	// Probes is how many refused orders of each kind are sent: without a
	// pass, with a forged pass, with another user's pass, and a pass used
	// again. Default 3; negative: none.
	Probes int
}

func (c RoomConfig) withDefaults(users int) (RoomConfig, error) {
	if c.Rate == 0 {
		c.Rate = 500
	}
	if c.PassTTL == 0 {
		c.PassTTL = 60 * time.Second
	}
	if c.OpenIn == 0 {
		c.OpenIn = 3*time.Second + time.Duration(users)*time.Millisecond
	}
	if c.Probes == 0 {
		c.Probes = 3
	}
	if c.PassFactor == 0 {
		c.PassFactor = 1
	}
	switch {
	case c.Late < 0:
		return c, errors.New("room: late users must be >= 0")
	case c.Rate < 1 || c.Rate > 100000:
		return c, errors.New("room: admit rate must be 1 to 100000")
	case c.PassTTL < 5*time.Second || c.PassTTL > time.Hour || c.PassTTL%time.Second != 0:
		return c, errors.New("room: pass ttl must be whole seconds from 5s to 1h")
	case c.OpenIn < time.Second:
		return c, errors.New("room: the opening must be at least 1s ahead")
	}
	return c, nil
}

// Steps of a simulated user.
const (
	stepJoin int8 = iota
	stepPoll
	stepBuy
)

// roomPropagation is how long after its creation a room may be unknown
// to an instance (they reload the rooms from the database every second).
const roomPropagation = 5 * time.Second

// maxProblems is how many contract violations are kept per user.
const maxProblems = 3

// roomUser is one simulated buyer. Only the worker running its step
// touches it while the room runs.
type roomUser struct {
	id   string
	late bool // joins after the opening
	step int8
	due  time.Time // when the current step was due

	joinStart time.Time // the first join attempt (a 503 may have taken the place)
	joinEnd   time.Time // the join that answered 200
	ticket    string
	number    int64

	state        string    // the last state read
	outcome      string    // set when the user stops: "bought", "sold_out", or why not
	polls        int       // status answers
	pass         string    // the pass, once admitted
	admitted     time.Time // when the room admitted the ticket (from the pass expiry)
	admittedSeen time.Time // the answer that first showed the pass
	lastLive     time.Time // start of the last poll answering waiting or admitted
	soldOutSeen  time.Time // the first answer reading sold_out

	orderSeq   int // seq of the first order attempt, -1 if none
	orderTries int
	orderID    string
	bought     bool
	refusal    string // the last refusal of the user's own order

	problems []string // contract violations seen on this user's answers (first few)
	nProblem int
	errors   int // answers with no verdict: transport errors, 429, 5xx
}

func (u *roomUser) problem(format string, args ...any) {
	u.nProblem++
	if len(u.problems) < maxProblems {
		u.problems = append(u.problems, fmt.Sprintf(format, args...))
	}
}

// workerStats are one worker's samples, merged at the end.
type workerStats struct {
	joins, polls, lags []time.Duration
	errors             map[string]int // by "join|poll|order HTTP status code"
}

// roomRun is one item's room run.
type roomRun struct {
	cfg      Config
	rc       RoomConfig
	cl       *client
	label    string
	itemID   int64
	created  time.Time
	startsAt time.Time
	users    []roomUser
	sched    *scheduler

	mu   sync.Mutex
	recs []Record

	probed                            atomic.Bool
	reuseProbes, probes               atomic.Int64
	joined, admitted, bought, soldOut atomic.Int64
	polls, errs                       atomic.Int64
	subSecond                         atomic.Bool // a pass expiry with a fraction of a second
	statsMu                           sync.Mutex
	joins, pollLat, lags              []time.Duration
	errorsBy                          map[string]int
}

func (rr *roomRun) addRecord(r *Record) int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	r.Seq = len(rr.recs)
	r.sent = true
	rr.recs = append(rr.recs, *r)
	return r.Seq
}

func (rr *roomRun) key(u int32, n int) string {
	return fmt.Sprintf("lt-%s-i%d-r%d-k%d", rr.cfg.RunID, rr.itemID, u, n)
}

// runRoomStrategy sells one item through its waiting room and verifies
// the sale (verify) and the room (verifyRoom).
func runRoomStrategy(ctx context.Context, cfg Config, cl *client, strategy string) (*StrategyReport, error) {
	label := strategy
	if label == "" {
		label = "default"
	}
	rc := cfg.Room
	startsAt := time.Now().Add(rc.OpenIn).Truncate(time.Second).Add(time.Second)
	lottery := !rc.NoLottery
	item, err := cl.createItem(ctx, fmt.Sprintf("loadtest-%s-room-%s", cfg.RunID, label), cfg.Stock, strategy, cfg.Buckets,
		map[string]any{"starts_at": startsAt.UTC().Format(time.RFC3339), "waiting_room": map[string]any{
			"admit_per_second": rc.Rate, "pass_ttl_seconds": int(rc.PassTTL / time.Second), "lottery": lottery}})
	if err != nil {
		return nil, err
	}
	if err := cl.awaitItemEverywhere(ctx, item.ID, 10*time.Second); err != nil {
		return nil, err
	}
	pre, err := cl.publicRoom(ctx, item.ID)
	if err != nil {
		return nil, err
	}
	if pre == nil {
		return nil, fmt.Errorf("item %d was created with a waiting room but its public view has none", item.ID)
	}

	n := cfg.Users + rc.Late
	rr := &roomRun{cfg: cfg, rc: rc, cl: cl, label: label, itemID: item.ID, created: time.Now(), startsAt: startsAt,
		users: make([]roomUser, n), sched: newScheduler(n), errorsBy: map[string]int{}}
	start := time.Now()
	for i := range rr.users {
		u := &rr.users[i]
		u.id, u.orderSeq, u.due = fmt.Sprintf("lt-%s-r%d", cfg.RunID, i), -1, start
		if i >= cfg.Users {
			// Late joins are spread over the second after the opening
			// (plus half a second for the service to open the room).
			u.late = true
			j := i - cfg.Users
			u.due = startsAt.Add(500*time.Millisecond + time.Duration(j)*time.Second/time.Duration(rc.Late))
		}
		rr.sched.at(u.due, int32(i))
	}
	loadCtx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	stop, pdone := make(chan struct{}), make(chan struct{})
	go rr.progress(stop, pdone)
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, n) {
		wg.Go(func() {
			w := &workerStats{errors: map[string]int{}}
			for i := range rr.sched.work {
				rr.step(ctx, w, i)
			}
			rr.statsMu.Lock()
			rr.joins = append(rr.joins, w.joins...)
			rr.pollLat = append(rr.pollLat, w.polls...)
			rr.lags = append(rr.lags, w.lags...)
			for k, v := range w.errors {
				rr.errorsBy[k] += v
			}
			rr.statsMu.Unlock()
		})
	}
	rr.sched.run(loadCtx)
	wg.Wait()
	close(stop)
	<-pdone
	end := time.Now()
	for _, i := range rr.sched.due() {
		u := &rr.users[i]
		u.outcome = fmt.Sprintf("cut off by the %s deadline (state %q)", cfg.MaxDuration, u.state)
	}

	after, err := rr.observeAfter(ctx)
	if err != nil {
		return nil, err
	}
	recs := slices.Clone(rr.recs)
	sr := newStrategyReport(label, item, cfg, recs, len(recs), start, end)
	sr.Drain = drain(ctx, cfg, cl, recs)
	if err := verify(ctx, cfg, cl, sr); err != nil {
		return nil, err
	}
	if err := rr.verifyRoom(ctx, sr, pre, after); err != nil {
		return nil, err
	}
	return sr, nil
}

// afterRun is what the harness reads once every user stopped.
type afterRun struct {
	draw      drawDoc
	drawErr   error
	admin     *roomView
	public    *roomView
	lateJoin  call // a new user's join after the run
	lateState string
}

func (rr *roomRun) observeAfter(ctx context.Context) (afterRun, error) {
	var a afterRun
	var err error
	a.draw, a.drawErr = rr.cl.draw(ctx, rr.itemID)
	if a.admin, err = rr.cl.adminRoom(ctx, rr.itemID); err != nil {
		return a, err
	}
	if a.public, err = rr.cl.publicRoom(ctx, rr.itemID); err != nil {
		return a, err
	}
	var v ticketView
	a.lateJoin = rr.cl.join(ctx, rr.itemID, fmt.Sprintf("lt-%s-after", rr.cfg.RunID), &v)
	a.lateState = v.State
	return a, nil
}

// step runs user i's due step on a worker.
func (rr *roomRun) step(ctx context.Context, w *workerStats, i int32) {
	u := &rr.users[i]
	if u.step == stepPoll {
		w.lags = append(w.lags, time.Since(u.due))
	}
	rctx, cancel := context.WithTimeout(ctx, rr.cfg.RequestTimeout)
	defer cancel()
	switch u.step {
	case stepJoin:
		rr.doJoin(rctx, w, i, u)
	case stepPoll:
		rr.doPoll(rctx, w, i, u)
	case stepBuy:
		rr.buy(rctx, i, u)
	}
}

func (rr *roomRun) next(i int32, due time.Time, step int8) {
	u := &rr.users[i]
	u.step, u.due = step, due
	rr.sched.at(due, i)
}

func (rr *roomRun) stop(u *roomUser, outcome string) {
	u.outcome = outcome
	rr.sched.finish()
}

// failed counts an answer without a verdict and reports whether to retry.
func (rr *roomRun) failed(w *workerStats, u *roomUser, what string, c call) bool {
	if c.err == nil && c.status != 0 && c.status != http.StatusTooManyRequests && c.status < 500 {
		return false
	}
	u.errors++
	rr.errs.Add(1)
	w.errors[fmt.Sprintf("%s %d %s", what, c.status, c.code)]++
	return true
}

func (rr *roomRun) doJoin(ctx context.Context, w *workerStats, i int32, u *roomUser) {
	var v ticketView
	c := rr.cl.join(ctx, rr.itemID, u.id, &v)
	w.joins = append(w.joins, c.end.Sub(c.start))
	if u.joinStart.IsZero() {
		u.joinStart = c.start
	}
	switch {
	case c.status == http.StatusOK && c.err == nil:
		rr.joined.Add(1)
		u.joinEnd = c.end
		u.ticket, u.number = v.Ticket, v.Number
		if v.Ticket == "" || v.Number <= 0 {
			u.problem("join answered ticket %q number %d", v.Ticket, v.Number)
		}
		if int(i) < rr.rc.Probes { // joining again gives the same place
			var again ticketView
			if c2 := rr.cl.join(ctx, rr.itemID, u.id, &again); c2.status == http.StatusOK && c2.err == nil &&
				(again.Ticket != v.Ticket || again.Number != v.Number) {
				u.problem("joined again: ticket %d, first %d", again.Number, v.Number)
			}
		}
		rr.observe(u, &v, c)
		rr.afterAnswer(ctx, i, u, &v, c)
	case c.status == http.StatusConflict && c.code == stateSoldOut:
		u.state, u.soldOutSeen = stateSoldOut, c.end
		rr.soldOut.Add(1)
		rr.stop(u, stateSoldOut)
	case rr.failed(w, u, "join", c):
		rr.next(i, c.end.Add(time.Second), stepJoin)
	case c.status == http.StatusConflict && c.code == "no_waiting_room" && time.Since(rr.created) < roomPropagation:
		// Another instance may not have loaded the new room yet.
		u.errors++
		rr.errs.Add(1)
		w.errors["join 409 no_waiting_room (retried)"]++
		rr.next(i, c.end.Add(200*time.Millisecond), stepJoin)
	default:
		u.problem("join refused: HTTP %d %s", c.status, c.code)
		rr.stop(u, fmt.Sprintf("join refused (HTTP %d %s)", c.status, c.code))
	}
}

func (rr *roomRun) doPoll(ctx context.Context, w *workerStats, i int32, u *roomUser) {
	var v ticketView
	c := rr.cl.ticketStatus(ctx, rr.itemID, u.ticket, &v)
	w.polls = append(w.polls, c.end.Sub(c.start))
	rr.polls.Add(1)
	switch {
	case c.status == http.StatusOK && c.err == nil:
		rr.observe(u, &v, c)
		rr.afterAnswer(ctx, i, u, &v, c)
	case rr.failed(w, u, "poll", c):
		rr.next(i, c.end.Add(time.Second), stepPoll)
	default:
		u.problem("status of ticket %d: HTTP %d %s", u.number, c.status, c.code)
		rr.stop(u, fmt.Sprintf("status refused (HTTP %d %s)", c.status, c.code))
	}
}

// afterAnswer acts on a ticket's state: buy when admitted, stop when
// final, else poll again after poll_after_ms.
func (rr *roomRun) afterAnswer(ctx context.Context, i int32, u *roomUser, v *ticketView, c call) {
	switch {
	case v.State == stateAdmitted && u.pass != "" && u.orderSeq < 0:
		if rr.probed.CompareAndSwap(false, true) {
			rr.refusalProbes(ctx, i, u)
		}
		rr.buy(ctx, i, u)
	case finalState(v.State), v.State == stateHeld:
		rr.settle(ctx, u)
	default:
		wait := time.Duration(v.PollAfterMS) * time.Millisecond
		if wait <= 0 {
			u.problem("state %s with poll_after_ms %d", v.State, v.PollAfterMS)
			wait = time.Second
		}
		rr.next(i, c.end.Add(wait), stepPoll)
	}
}
