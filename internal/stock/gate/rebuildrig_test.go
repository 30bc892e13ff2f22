package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// The interleavings of a bucketed hand-back (three scripts: the check in
// the buyer's home bucket, the release in the order's release bucket, the
// drop of the buyer entry) with a rebuild of the item (clear the metas,
// read each bucket's held reservations, install each bucket, then finish
// what the hand-backs left), driven step by step: the rebuild's client
// stops at each of its points (rebuildPoints) and runs the hand-back steps
// scheduled there, each to its end, before going on. No sleeps.

// errCut is what a hand-back's script gets when its process "died" there.
var errCut = errors.New("test: the hand-back was cut short here")

// The rebuild's points, for an item of k buckets: before it starts, before
// it reads bucket b's held reservations, before it installs bucket b,
// after the last install returned, before the rebuild's own release of a
// hand-back's unit (if it has one to release), after Rebuild returned.
func pointBeforeClear() int     { return 0 }
func pointRead(b int) int       { return 1 + b }
func pointInstall(k, b int) int { return 1 + k + b }
func pointInstalled(k int) int  { return 1 + 2*k }
func pointFinish(k int) int     { return 2 + 2*k }
func pointDone(k int) int       { return 3 + 2*k }

func pointName(k, p int) string {
	switch {
	case p == pointBeforeClear():
		return "start"
	case p < pointInstall(k, 0):
		return fmt.Sprintf("read%d", p-pointRead(0))
	case p < pointInstalled(k):
		return fmt.Sprintf("install%d", p-pointInstall(k, 0))
	case p == pointInstalled(k):
		return "installed"
	case p == pointFinish(k):
		return "finishing"
	}
	return "done"
}

// stepper runs one HandBack on its own goroutine, one script at a time.
type stepper struct {
	ev      chan stepEvent // the hand-back is about to run a script, or has returned
	proceed chan bool      // true: run it; false: cut the hand-back short here
	pending *stepEvent
	at      []int // the point of each step; fewer than its steps: cut short after them
	ran     int
}

type stepEvent struct {
	done bool
	err  error
}

// stepHook, on a hand-back's client, stops before each script, for the
// stepper of the case under way.
type stepHook struct{ s *stepper }

func (h *stepHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stepHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := strings.ToLower(cmd.Name()); n == "evalsha" || n == "eval" {
			h.s.ev <- stepEvent{}
			if !<-h.s.proceed {
				cmd.SetErr(errCut)
				return errCut
			}
		}
		return next(ctx, cmd)
	}
}

func (h *stepHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *stepper) next() stepEvent {
	if s.pending == nil {
		e := <-s.ev
		s.pending = &e
	}
	return *s.pending
}

// advance runs, to its end, each step scheduled at or before point p.
func (s *stepper) advance(p int) {
	for s.ran < len(s.at) && s.at[s.ran] <= p {
		if s.next().done {
			s.ran = len(s.at) // the hand-back needed fewer steps
			return
		}
		s.pending = nil
		s.proceed <- true
		s.ran++
		s.next() // wait until the step has run: the next script, or the end
	}
}

// finish cuts the hand-back short before its next step, if it has one,
// and reports how it ended.
func (s *stepper) finish() error {
	for e := s.next(); ; e = s.next() {
		if e.done {
			return e.err
		}
		s.pending = nil
		s.proceed <- false
	}
}

// pointHook, on the rebuild's client, stops at the rebuild's points.
type pointHook struct {
	keys Keys
	item int64
	k    int
	at   func(p int) // nil: not armed
	// failVoids fails, when armed, a pipeline that reads void markers (the
	// rebuild's last step, finishing hand-backs), as a Redis error would.
	failVoids bool
}

func (h *pointHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pointHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.at == nil {
			return next(ctx, cmd)
		}
		args := cmd.Args()
		installed := -1
		for b, bk := range AllBuckets(h.item, h.k) {
			keys := h.keys.Bucket(bk)
			switch strings.ToLower(cmd.Name()) {
			case "hscan":
				if len(args) > 2 && args[1] == keys.Buyers && fmt.Sprint(args[2]) == "0" {
					h.at(pointRead(b))
				}
			case "evalsha", "eval":
				if len(args) > 3 && (args[1] == rebuildScript.Hash() || args[1] == rebuildSrc) && args[3] == keys.Meta {
					h.at(pointInstall(h.k, b))
					installed = b
				}
				if len(args) > 3 && (args[1] == releaseScript.Hash() || args[1] == releaseSrc) && args[3] == keys.Meta {
					h.at(pointFinish(h.k))
				}
			}
		}
		err := next(ctx, cmd)
		if installed == h.k-1 {
			h.at(pointInstalled(h.k))
		}
		return err
	}
}

var errVoids = errors.New("test: the read of the void markers failed")

func (h *pointHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.at != nil && h.failVoids {
			for _, cmd := range cmds {
				if args := cmd.Args(); strings.ToLower(cmd.Name()) == "exists" && len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), ":void:") {
					for _, c := range cmds {
						c.SetErr(errVoids)
					}
					return errVoids
				}
			}
		}
		return next(ctx, cmds)
	}
}

// raceHandBack is one hand-back racing the rebuild: user's reservation for
// order, in home, released in rel, its steps at the points at.
type raceHandBack struct {
	user, order string
	home, rel   Bucket
	at          []int
}

func (hb raceHandBack) String() string {
	return fmt.Sprintf("%d->%d", hb.home.B, hb.rel.B)
}

// pickHandBack finds a user whose home is bucket home and an order id whose
// release bucket is rel.
func pickHandBack(id int64, k, home, rel int, tag string) raceHandBack {
	hb := raceHandBack{}
	for i := 0; ; i++ {
		if u := fmt.Sprintf("%s-u%d", tag, i); HomeBucket(id, k, u).B == home {
			hb.user, hb.home = u, HomeBucket(id, k, u)
			break
		}
	}
	for i := 0; ; i++ {
		if o := fmt.Sprintf("%s-o%d", tag, i); ReleaseBucket(id, k, o).B == rel {
			hb.order, hb.rel = o, ReleaseBucket(id, k, o)
			break
		}
	}
	return hb
}

// schedules lists every nondecreasing choice of n points among pts.
func schedules(pts []int, n int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for i, p := range pts {
		for _, rest := range schedules(pts[i:], n-1) {
			out = append(out, append([]int{p}, rest...))
		}
	}
	return out
}

// raceRig is a gate whose rebuild stops at its points, and a fresh item
// per case.
type raceRig struct {
	t      *testing.T
	b      testenv.Backend
	g      *Gate
	hook   *pointHook
	slots  *testenv.SlotCheck
	nextID int64
	// failVoids: the rebuild fails at its last step (see pointHook), and
	// must leave the gate missing; the next rebuild must be exact.
	failVoids   bool
	voidsFailed int // rebuilds that failed so
	// fired: the points the rebuild's hook stopped at, over every case.
	fired map[int]bool
	// One gate per hand-back of a case, each on its own client whose hook
	// runs the case's stepper.
	others []*Gate
	steps  []*stepHook
}

func newRaceRig(t *testing.T, b testenv.Backend) *raceRig {
	rdb := b.Universal(t)
	keys, err := NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	hook := &pointHook{keys: keys}
	slots := &testenv.SlotCheck{}
	rdb.AddHook(slots)
	rdb.AddHook(hook)
	pipe := NewPipeline(rdb, nil)
	t.Cleanup(pipe.Close)
	ctx := context.Background()
	for _, s := range []*redis.Script{handBackScript, handBackHomeScript, releaseScript, dropBuyerScript} {
		// Loaded first, so that each step of a hand-back is one command.
		if err := s.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if v := slots.Violations(); len(v) > 0 {
			t.Errorf("commands across slots: %v", v)
		}
		if n := slots.Scripts(); n < 10 {
			t.Errorf("the slot check saw %d scripts, want every hand-back's and rebuild's: is it hooked?", n)
		}
	})
	return &raceRig{t: t, b: b, g: New(rdb, keys, pipe, nil), hook: hook, slots: slots, nextID: 100, fired: map[int]bool{}}
}

// run sells one unit of a new item of k buckets in the database, holds one
// reservation in flight that stays (user w), and one per hand-back; then
// rebuilds the item while the hand-backs run at their points, cuts short
// the hand-backs with fewer scheduled steps than they take, and hands each
// back once more after the rebuild (a retry, or the orphan hand-back that
// finishes one cut short). The gate must then hold exactly what the
// database and the reservation in flight hold: no unit lost, none twice.
func (r *raceRig) run(t *testing.T, k int, hbs []raceHandBack) {
	ctx := context.Background()
	const units = 12
	r.nextID++
	id := r.nextID
	it := &stock.Item{ID: id, Stock: units, Sold: 1, Buckets: k}
	snap := Rebuild{Item: it, Buyers: map[string]string{"sold": "o-sold"}, Done: map[string]bool{"o-sold": true}, KeepHeld: true}
	if _, err := r.g.Rebuild(ctx, snap); err != nil {
		t.Fatal(err)
	}
	for i := range hbs {
		hb := pickHandBack(id, k, hbs[i].home.B, hbs[i].rel.B, fmt.Sprintf("h%d", i))
		hb.at = hbs[i].at
		hbs[i] = hb
	}
	held := append([]raceHandBack{{user: "w", order: "o-w", home: HomeBucket(id, k, "w")}}, hbs...)
	for _, h := range held {
		if _, err := r.g.Reserve(ctx, h.home, h.user, h.order, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	steppers := make([]*stepper, len(hbs))
	for i, hb := range hbs {
		s := &stepper{ev: make(chan stepEvent), proceed: make(chan bool), at: hb.at}
		steppers[i] = s
		if i == len(r.others) {
			rdb := r.b.Universal(t)
			rdb.AddHook(r.slots)
			h := &stepHook{}
			rdb.AddHook(h)
			r.others, r.steps = append(r.others, New(rdb, r.g.keys, nil, nil)), append(r.steps, h)
		}
		r.steps[i].s = s
		other := r.others[i]
		go func() {
			_, err := other.HandBack(ctx, hb.home, hb.user, hb.order, "")
			s.ev <- stepEvent{done: true, err: err}
		}()
	}
	advance := func(p int) {
		for _, s := range steppers {
			s.advance(p)
		}
	}
	advance(pointBeforeClear())
	stop := func(p int) {
		r.fired[p] = true
		advance(p)
	}
	r.hook.item, r.hook.k, r.hook.at, r.hook.failVoids = id, k, stop, r.failVoids
	_, err := r.g.Rebuild(ctx, snap)
	r.hook.at = nil
	advance(pointDone(k))
	for i, s := range steppers {
		if herr := s.finish(); herr != nil && !errors.Is(herr, errCut) {
			t.Errorf("hand-back %d: %v", i, herr)
		}
	}
	if r.failVoids && errors.Is(err, errVoids) {
		r.voidsFailed++
		if all, err := r.g.ExistsAll(ctx, id, k); err != nil || all {
			t.Fatalf("after a rebuild that failed at its end: every bucket present %v (%v), want the gate missing (%s)", all, err, describe(k, hbs))
		}
		_, err = r.g.Rebuild(ctx, snap)
	}
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	for _, hb := range hbs {
		if _, err := r.g.HandBack(ctx, hb.home, hb.user, hb.order, ""); err != nil {
			t.Fatalf("hand-back after the rebuild: %v", err)
		}
	}
	v, err := r.g.ReadBuckets(ctx, id, k, true)
	if err != nil {
		t.Fatal(err)
	}
	// The database sold 1; w's write is in flight; the rest came back.
	if want := int64(2); v.Stock != units || v.Taken != want || v.Free != units-want {
		t.Errorf("after the rebuild: stock %d, taken %d, free %d; want %d, %d, %d (%s)",
			v.Stock, v.Taken, v.Free, units, want, units-want, describe(k, hbs))
	}
	for _, hb := range hbs {
		if o, ok := v.Buyers[hb.user]; ok {
			t.Errorf("handed-back user %s still holds %s (%s)", hb.user, o, describe(k, hbs))
		}
	}
	if v.Buyers["w"] != "o-w" || v.Buyers["sold"] != "o-sold" {
		t.Errorf("buyers %v: want w (in flight) and sold (in the database) kept (%s)", v.Buyers, describe(k, hbs))
	}
}

func describe(k int, hbs []raceHandBack) string {
	var parts []string
	for _, hb := range hbs {
		var at []string
		for _, p := range hb.at {
			at = append(at, pointName(k, p))
		}
		if len(at) < 3 {
			at = append(at, "cut")
		}
		parts = append(parts, fmt.Sprintf("hand-back %s at %s", hb, strings.Join(at, ",")))
	}
	return strings.Join(parts, "; ")
}

func allPoints(k int) []int {
	var pts []int
	for p := pointBeforeClear(); p <= pointDone(k); p++ {
		pts = append(pts, p)
	}
	return pts
}

// firedEverywhere fails t unless the rebuild's hook stopped at each of its
// points of an item of k buckets (those between its start and its end)
// in some case: a point never reached would leave its interleavings
// untested.
func (r *raceRig) firedEverywhere(t *testing.T, k int) {
	for p := pointRead(0); p < pointDone(k); p++ {
		if !r.fired[p] {
			t.Errorf("the rebuild never stopped at point %s: is the hook reading the right commands?", pointName(k, p))
		}
	}
}
