package rooms

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// entry is one roomed item in this process.
type entry struct {
	id    int64
	room  *room.Room
	joins *joinBatcher
	set   atomic.Pointer[row]
	// ready: the room is set up in Redis with set's commitment and TTL.
	ready atomic.Bool
	// ctlSync: set's Paused or AdmitPerSecond changed and is not written
	// to Redis yet (room.SetControl).
	ctlSync atomic.Bool
	// stats is the room as the loop last read it; view the item.
	stats   atomic.Pointer[room.Stats]
	statsAt atomic.Int64 // when stats was read, Unix ns
	view    atomic.Pointer[stock.ItemView]

	mu       sync.Mutex
	joined   map[int64]time.Time // tickets joined here, not yet seen admitted
	samples  []sample            // admitted counts, for admitted_per_second
	ticks    int64
	lastWarn time.Time
	cancel   context.CancelFunc
	// lostLine is the commitment of the line this loop saw in Redis and
	// then found gone (a Redis loss, or the room turned off elsewhere).
	lostLine atomic.Pointer[string]
	// seen: tickets polled or joined here since the loop's last flush
	// (room.MarkSeen), under seenMu; at most maxSeen.
	seenMu sync.Mutex
	seen   map[int64]struct{}
	// ep is the epoch of the room's set-up in Redis, as last read.
	ep atomic.Pointer[epoch]
	// idle: the sale ended, the loop ticks at idlePace (pace).
	idle atomic.Bool
	// held: closed (sold out) while a unit may still come back (held.go);
	// closedAt and heldAt are the loop's alone.
	held             atomic.Bool
	closedAt, heldAt time.Time
	// rank is the draw's serve number of each pre-queue ticket, computed
	// from the seed of commitment rankFor (cache.go).
	rank    []uint32
	rankFor string
	// recordedFor is the commitment whose opening this process wrote to
	// room_draws (draw.go).
	recordedFor atomic.Pointer[string]
}

type sample struct {
	at       time.Time
	admitted int64
}

// maxJoinTimes bounds the join times a room keeps for the wait metric: a
// ticket joined here but admitted by another instance leaves its entry
// until the line passes it (pruneJoins).
const maxJoinTimes = 1 << 16

func newEntry(rm *room.Room, r *row) *entry {
	e := &entry{id: r.ItemID, room: rm, joined: map[int64]time.Time{}}
	e.set.Store(r)
	return e
}

// update takes a reloaded row: a new commitment or pass TTL sets the room
// up in Redis again.
func (e *entry) update(r *row) {
	old := e.set.Swap(r)
	if old.Commitment != r.Commitment || old.PassTTLSeconds != r.PassTTLSeconds || old.Lottery != r.Lottery {
		e.ready.Store(false)
	}
	if old.Paused != r.Paused || old.AdmitPerSecond != r.AdmitPerSecond {
		e.ctlSync.Store(true)
	}
}

func (e *entry) stop() {
	if e.cancel != nil {
		e.cancel()
	}
}

func (e *entry) noteJoin(ticket int64, at time.Time, startsAt *time.Time) {
	if startsAt != nil && at.Before(*startsAt) {
		return // a pre-queue ticket waits from the opening
	}
	e.mu.Lock()
	if _, ok := e.joined[ticket]; !ok && len(e.joined) < maxJoinTimes {
		e.joined[ticket] = at
	}
	e.mu.Unlock()
}

// pruneJoins drops the join times of tickets the line has passed (admitted
// by another instance; tickets after the pre-queue are served in number
// order).
func (e *entry) pruneJoins(head int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for t := range e.joined {
		if t <= head {
			delete(e.joined, t)
		}
	}
}

// admittedPerSecond is the admissions of the last second, from the loop's
// samples (all instances', as counted in Redis).
func (e *entry) admittedPerSecond() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.samples)
	if n < 2 {
		return 0
	}
	last := e.samples[n-1]
	for i := n - 2; i >= 0; i-- {
		if last.at.Sub(e.samples[i].at) >= time.Second {
			return last.admitted - e.samples[i].admitted
		}
	}
	return 0
}

// addSample records the admitted count at a tick and returns the tick's
// number.
func (e *entry) addSample(at time.Time, admitted int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.samples = append(e.samples, sample{at, admitted})
	if len(e.samples) > 30 {
		e.samples = append(e.samples[:0], e.samples[len(e.samples)-20:]...)
	}
	e.ticks++
	return e.ticks
}

// startLoop runs e's admission loop until e or the service stops. The
// caller holds s.mu.
func (s *Service) startLoop(e *entry) {
	ctx, cancel := context.WithCancel(s.ctx)
	e.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(s.cfg.Tick)
		defer t.Stop()
		for {
			tctx, done := context.WithTimeout(ctx, 3*s.cfg.RedisTimeout)
			if err := s.tick(tctx, e); err != nil && ctx.Err() == nil {
				e.warn(s, err)
			}
			done()
			t.Reset(s.pace(e))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// idlePace is how often the loop of a room whose sale ended ticks: it
// admits nobody, and only watches for a changed ends_at (an admin
// extending the sale). Ten times a second for every such room cost every
// instance load for nothing (the redteam's 32 idle rooms).
const idlePace = 5 * time.Second

// pace is how long e's loop waits before its next tick: Tick, Reload once
// sold out for good (held.go), idlePace once the sale ended, and never
// past starts_at, so the room opens on
// time (a tick late, joins up to a tick after starts_at were drawn).
func (s *Service) pace(e *entry) time.Duration {
	d := s.cfg.Tick
	if st := e.stats.Load(); st != nil && st.Closed && !e.held.Load() {
		d = s.cfg.Reload // sold out for good: only a restock changes it
	}
	if e.idle.Load() {
		d = idlePace
	}
	if v := e.view.Load(); v != nil && v.StartsAt != nil {
		if u := v.StartsAt.Sub(s.cfg.Now()); u > 0 && u < d {
			d = u
		}
	}
	return d
}

func (e *entry) warn(s *Service, err error) {
	e.mu.Lock()
	now := time.Now()
	quiet := now.Sub(e.lastWarn) < 10*time.Second
	if !quiet {
		e.lastWarn = now
	}
	e.mu.Unlock()
	if !quiet {
		s.log.Warn("waiting room: admission tick failed (repeats are not logged for 10 s)", "item", e.id, "err", err)
	}
}

// setup creates e's room in Redis from the stored row: every instance may,
// it is idempotent. A room in Redis with another commitment is a line left
// from before the item's room was turned off and on again: the database
// wins (checked again there first). A FIFO room (lottery off) opens at
// once, with an empty pre-queue: its tickets are served in number order
// (nobody is admitted before starts_at: the loop does not call Admit).
func (s *Service) setup(ctx context.Context, e *entry) error {
	r := e.set.Load()
	created, err := e.room.SetupCreated(ctx, r.Commitment, r.passTTL())
	if errors.Is(err, room.ErrRoomExists) {
		cur, lerr := loadRow(ctx, s.db, e.id)
		if lerr != nil {
			return lerr
		}
		if cur == nil || cur.Commitment != r.Commitment {
			return nil // the reload will bring the change
		}
		s.log.Warn("waiting room: redis holds an older line of this item; replacing it with the stored room", "item", e.id)
		if err = e.room.Delete(ctx); err == nil {
			err = e.room.Setup(ctx, r.Commitment, r.passTTL())
		}
	}
	if err != nil {
		return err
	}
	if created {
		if err := s.holdRebuilt(ctx, e, r); err != nil {
			return err
		}
	}
	if err := e.room.SetPassTTL(ctx, r.passTTL()); err != nil {
		return err
	}
	if err := e.room.SetControl(ctx, r.Paused, r.AdmitPerSecond); err != nil {
		return err
	}
	if !r.Lottery {
		seed, err := r.seed()
		if err != nil {
			return err
		}
		if err := e.room.Open(ctx, seed); err != nil {
			return err
		}
	}
	if e.set.Load() == r {
		e.ready.Store(true)
	}
	return nil
}

// tick is one round of e's loop: set up if needed, Open at starts_at,
// Close when sold out and Resume when stock comes back, and Admit.
func (s *Service) tick(ctx context.Context, e *entry) (err error) {
	defer func() {
		if errors.Is(err, room.ErrNoRoom) {
			// Whichever step found it gone (the seen flush, the mark, the
			// stats, the admission): Redis lost it; set it up again next
			// tick, with the hold of a lost line.
			e.lost()
		}
	}()
	if !e.ready.Load() {
		if err := s.setup(ctx, e); err != nil {
			return err
		}
	}
	r := e.set.Load()
	if e.ctlSync.Swap(false) {
		// Every instance writes the controls it learned last: the last to
		// learn writes the stored values.
		if err := e.room.SetControl(ctx, r.Paused, r.AdmitPerSecond); err != nil {
			e.ctlSync.Store(true)
			return err
		}
	}
	// The admission round's figure: first a mark on the room's Redis
	// clock, then the remaining stock read fresh, so it shows the order of
	// every pass spent before the mark (the order is taken first), and
	// Admit counts only the passes spent since against it. A cached view
	// (up to ~250 ms old) would not: a pass spent before the mark but after
	// that read would free its slot for a unit already sold.
	if err := s.flushSeen(ctx, e); err != nil {
		return err
	}
	mark, err := e.room.Mark(ctx)
	if err != nil {
		return err
	}
	v, verr := s.shop.FreshItemView(ctx, e.id)
	if verr == nil {
		e.view.Store(v)
	}
	readAt := s.cfg.Now()
	st, err := e.room.Stats(ctx)
	if err != nil {
		return err
	}
	e.setEpoch(st.Epoch)
	now := s.cfg.Now()
	// The opening needs no stock figure, only starts_at: the last view
	// read (or the shop's cached one) knows it, so a database outage at
	// starts_at does not hold the pre-queue open (joins after starts_at
	// are never drawn).
	known := e.view.Load()
	if known == nil {
		if known, err = s.shop.ItemView(ctx, e.id); err != nil {
			return errors.Join(verr, err)
		}
	}
	opened := known.StartsAt == nil || !now.Before(*known.StartsAt)
	if opened && st.Phase != "open" {
		seed, err := r.seed()
		if err != nil {
			return err
		}
		if err := e.room.Open(ctx, seed); err != nil {
			return err
		}
		// Read again: the pre-queue's size is set by the opening, and a
		// poll answered from these counters needs it (cache.go).
		readAt = s.cfg.Now()
		if st, err = e.room.Stats(ctx); err != nil {
			return err
		}
	}
	if st.Phase == "open" {
		s.recordOpening(ctx, e, r, st.PreQueue, st.Transcript, now)
	}
	if verr != nil {
		// No fresh stock figure: no admission round (its cap needs one).
		return verr
	}
	ended := v.EndsAt != nil && !now.Before(*v.EndsAt)
	e.idle.Store(ended)
	soldOut := v.Remaining <= 0
	switch {
	case soldOut && !st.Closed:
		if err := e.room.Close(ctx); err != nil {
			return err
		}
		st.Closed = true
	case !soldOut && st.Closed:
		if err := e.room.Resume(ctx); err != nil {
			return err
		}
		st.Closed = false
	}
	s.noteClosed(ctx, e, st.Closed, now)
	if opened && !st.Closed && !ended {
		// Paused: Admit with no room for a pass still hands on the
		// expired ones' count and admits nobody.
		maxLive := 0
		if !r.Paused {
			maxLive = passCap(s.cfg.PassFactor, v.Remaining)
		}
		a, err := e.room.Admit(ctx, now, mark, r.AdmitPerSecond, maxLive)
		if err != nil && !errors.Is(err, room.ErrSoldOut) && !errors.Is(err, room.ErrStaleMark) {
			return err
		}
		s.admitted(e, &st, a, v, now)
		if errors.Is(err, room.ErrStaleMark) {
			// This round took longer than room.SpentGrace from its mark
			// (a stalled read): it admitted nobody; the next one will.
			e.warn(s, err)
		}
	}
	e.stats.Store(&st)
	e.statsAt.Store(readAt.UnixNano())
	if e.addSample(now, st.Admitted)%10 == 0 {
		e.pruneJoins(st.Tickets - st.Waiting) // once a second
	}
	s.obs.RoomWaiting(e.id, st.Waiting)
	return nil
}

// passCap is the most unused passes for remaining units at factor f:
// rounded up, so every factor the config accepts (0.1 to 100) offers the
// last unit too (floor(0.5 × 1) would be 0, and the unit never sold).
func passCap(f float64, remaining int64) int {
	if remaining <= 0 {
		return 0
	}
	return int(math.Min(math.Max(1, math.Ceil(f*float64(remaining))), math.MaxInt32))
}

// admitted records one Admit call's effect: metrics, and the stats the
// loop keeps.
func (s *Service) admitted(e *entry, st *room.Stats, a room.Admission, v *stock.ItemView, now time.Time) {
	n := int64(len(a.Tickets))
	st.Waiting -= a.Advanced
	st.Admitted += n
	st.Live += n - a.Expired - a.Unclaimed
	st.Expired += a.Expired
	if a.Expired > 0 {
		s.obs.RoomPassesExpired(e.id, a.Expired)
	}
	if a.Deferred > 0 {
		s.obs.RoomDeferred(e.id, "seen", a.Deferred)
	}
	if a.Unclaimed > 0 {
		s.obs.RoomDeferred(e.id, "unclaimed", a.Unclaimed)
	}
	if n == 0 {
		return
	}
	s.obs.RoomAdmitted(e.id, len(a.Tickets))
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range a.Tickets {
		from, ok := e.joined[t]
		delete(e.joined, t)
		if v.StartsAt != nil && (t <= st.PreQueue || (ok && from.Before(*v.StartsAt))) {
			from, ok = *v.StartsAt, true // waited from the opening
		}
		if ok {
			s.obs.RoomWait(now.Sub(from))
		}
	}
}
