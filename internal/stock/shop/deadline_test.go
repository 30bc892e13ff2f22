package shop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// pipelineTrap runs a function once, inside the Redis client, when a
// pipeline carrying a command that matches is about to be sent: a
// deterministic way to end a request's context while its call is in flight.
// sent is closed once that pipeline has been answered.
type pipelineTrap struct {
	mu    sync.Mutex
	match func(redis.Cmder) bool
	fire  func()
	sent  chan struct{}
}

// arm sets the trap and returns a channel closed once the trapped call has
// been answered.
func (h *pipelineTrap) arm(match func(redis.Cmder) bool, fire func()) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.match, h.fire, h.sent = match, fire, make(chan struct{})
	return h.sent
}

func (h *pipelineTrap) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pipelineTrap) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sent := h.check([]redis.Cmder{cmd})
		err := next(ctx, cmd)
		if sent != nil {
			close(sent)
		}
		return err
	}
}

func (h *pipelineTrap) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sent := h.check(cmds)
		err := next(ctx, cmds)
		if sent != nil {
			close(sent)
		}
		return err
	}
}

func (h *pipelineTrap) check(cmds []redis.Cmder) chan struct{} {
	h.mu.Lock()
	fire, sent := h.fire, h.sent
	if fire == nil || !slices.ContainsFunc(cmds, h.match) {
		h.mu.Unlock()
		return nil
	}
	h.match, h.fire = nil, nil
	h.mu.Unlock()
	fire()
	return sent
}

// isScript matches an EVALSHA of script.
func isScript(script *redis.Script) func(redis.Cmder) bool {
	return func(c redis.Cmder) bool {
		args := c.Args()
		return c.Name() == "evalsha" && len(args) > 1 && args[1] == script.Hash()
	}
}

// waitLedger polls until ok accepts the item's ledger or d passes, and
// returns the last one read.
func waitLedger(t *testing.T, s *Service, rdb *redis.Client, itemID int64, d time.Duration, ok func(ledger) bool) ledger {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l := readLedger(t, s, rdb, itemID)
		if ok(l) || time.Now().After(deadline) {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Defect 3 of issue 10: a request whose context ends while the reserve
// script is in flight. The script runs (Redis got it) but the caller has
// gone: the reservation must still be settled, handed back within seconds,
// so the gate agrees with the database and the same user can buy.
func TestReserveInFlightWhenContextEnds(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		rdb := b.Redis(t)
		trap := &pipelineTrap{}
		rdb.AddHook(trap)
		s := newTestService(t, b, Config{}, rdb)
		bg := context.Background()
		it, err := s.CreateItem(bg, stock.NewItem{Name: "last unit", Stock: 1, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}

		// Loaded, so the trapped EVALSHA is the one that runs (not a
		// NOSCRIPT answered before the fallback).
		if err := gate.ReserveScript().Load(bg, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		returned := make(chan struct{})
		// The client gives up once the reserve script is on its way, and
		// Redis runs it only after the request has returned.
		sent := trap.arm(isScript(gate.ReserveScript()), func() {
			cancel()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Error("PlaceOrder did not return when its context ended")
			}
		})
		req := stock.OrderRequest{ItemID: it.ID, UserID: "Alice"}
		_, _, err = s.PlaceOrder(ctx, req)
		close(returned)
		if !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("order whose context ended in flight: got %v, want ErrUnavailable", err)
		}
		<-sent // the script has run

		l := waitLedger(t, s, rdb, it.ID, 3*time.Second, func(l ledger) bool { return l.taken == l.sold })
		if l.taken != l.sold || l.sold != 0 {
			t.Fatalf("3s after the abandoned reserve: gate taken %d, database sold %d; want both 0", l.taken, l.sold)
		}
		if _, _, err := s.PlaceOrder(bg, req); err != nil {
			t.Fatalf("the same user buys again: got %v, want the order", err)
		}
		if l := readLedger(t, s, rdb, it.ID); l.taken != 1 || l.sold != 1 {
			t.Errorf("after the second attempt: gate taken %d, database sold %d; want 1 and 1", l.taken, l.sold)
		}
	})
}

// A reserve that reaches Redis only after its attempt was handed back (its
// caller gave up; a stalled connection delivered the command late) takes
// nothing: the hand-back left the attempt void.
func TestReserveAfterItsHandBackTakesNothing(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		rdb := b.Redis(t)
		s := newTestService(t, b, Config{}, rdb)
		ctx := context.Background()
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "late reserve", Stock: 1, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		const orderID = "01a20000-0000-7000-8000-000000000001"
		if back, err := s.lua.handBackNow(ctx, gate.Single(it.ID), "Bob", orderID, ""); err != nil || back {
			t.Fatalf("hand-back before the reserve: got %v, %v; want false, nil", back, err)
		}
		if _, err := s.lua.reserve(ctx, gate.Single(it.ID), "Bob", orderID); !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("reserve after its hand-back: got %v, want ErrUnavailable", err)
		}
		if l := readLedger(t, s, rdb, it.ID); l.taken != 0 {
			t.Errorf("gate taken after the late reserve: got %d, want 0", l.taken)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "Bob"}); err != nil {
			t.Errorf("a new attempt by the same user: got %v, want the order", err)
		}
	})
}

// deadlineGuard is a writeGuard that records the context its writer holds
// the lock with.
type deadlineGuard struct {
	mu  sync.Mutex
	got []time.Time
}

func (g *deadlineGuard) hold(ctx context.Context, _ writeKey) (int64, error) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Time{}
	}
	g.mu.Lock()
	g.got = append(g.got, d)
	g.mu.Unlock()
	return 0, nil
}

func (g *deadlineGuard) raiseFence(ctx context.Context, wk writeKey) (int64, error) {
	return g.hold(ctx, wk)
}

func (g *deadlineGuard) done(writeKey, bool) {}

// The orphan window (suspicion in issue 10): a reservation without an
// order is taken for an orphan only when no live request can still write
// it. A write's transaction, lock wait included, ends before its caller's
// deadline, so a request lives at most the request timeout; the window is
// at least that plus a margin for clocks, whatever the request timeout.
func TestOrphanWindowOutlivesEveryRequest(t *testing.T) {
	t.Parallel()
	for _, rt := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
		if w := orphanWindow(rt); w < rt+30*time.Second || w < time.Minute {
			t.Errorf("orphan window for a %v request timeout: got %v, want at least %v and a minute", rt, w, rt+30*time.Second)
		}
	}
	b := testenv.Embedded(t)
	s := newTestService(t, b, Config{RequestTimeout: 50 * time.Second}, nil)
	if got, want := s.lua.orphanAfter, 80*time.Second; got != want {
		t.Errorf("gate orphan window with a 50s request timeout: got %v, want %v", got, want)
	}

	// No transaction outlives its callers: the writer holds the lock, and
	// writes, with a deadline before the earliest caller's.
	st := newTestStore(t, b, nil)
	it := &stock.Item{Name: "deadlines", Stock: 10, Strategy: stock.StrategyLock}
	if err := st.CreateItem(context.Background(), it, nil); err != nil {
		t.Fatal(err)
	}
	guard := &deadlineGuard{}
	w := newOrderWriter(st, guard)
	defer w.close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	callerDeadline, _ := ctx.Deadline()
	if err := w.write(ctx, &stock.Order{ID: "01a2ffff-0000-7000-8000-000000000001", ItemID: it.ID, UserID: "Carol"}, "", false, 1, nil); err != nil {
		t.Fatal(err)
	}
	// A caller without a deadline is bounded by the request timeout.
	if err := w.write(context.Background(), &stock.Order{ID: "01a2ffff-0000-7000-8000-000000000002", ItemID: it.ID, UserID: "Dave"}, "", false, 1, nil); err != nil {
		t.Fatal(err)
	}
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if len(guard.got) != 2 {
		t.Fatalf("lock holds: got %d, want 2", len(guard.got))
	}
	if d := guard.got[0]; d.IsZero() || d.After(callerDeadline.Add(-answerMargin)) {
		t.Errorf("transaction deadline %v, want at or before the caller's %v less %v", d, callerDeadline, answerMargin)
	}
	if d := guard.got[1]; d.IsZero() || time.Until(d) > DefaultRequestTimeout {
		t.Errorf("transaction deadline of a caller without one: %v, want within the %v request timeout", d, DefaultRequestTimeout)
	}
}

// The lua-async enqueue abandoned in flight (issue 10, defect 3's twin):
// the script is atomic, so the order it queued is a whole order, written
// like any other. The lost 202 is found by a retry with the same key, the
// gate agrees with the database once written, and nothing is left
// half-done.
func TestEnqueueInFlightWhenContextEnds(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		rdb := b.Redis(t)
		trap := &pipelineTrap{}
		rdb.AddHook(trap)
		s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, rdb)
		bg := context.Background()
		it, err := s.CreateItem(bg, stock.NewItem{Name: "queued", Stock: 2, Strategy: stock.StrategyLuaAsync})
		if err != nil {
			t.Fatal(err)
		}
		if err := queue.EnqueueScript().Load(bg, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		returned := make(chan struct{})
		sent := trap.arm(isScript(queue.EnqueueScript()), func() {
			cancel()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Error("PlaceOrder did not return when its context ended")
			}
		})
		req := stock.OrderRequest{ItemID: it.ID, UserID: "Erin", IdempotencyKey: "Erin-1"}
		_, _, err = s.PlaceOrder(ctx, req)
		close(returned)
		if !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("enqueue whose context ended in flight: got %v, want ErrUnavailable", err)
		}
		<-sent
		o, replayed, err := s.PlaceOrder(bg, req)
		if err != nil || !replayed {
			t.Fatalf("retry with the same key: got %+v, replayed %v, %v; want the queued order replayed", o, replayed, err)
		}
		awaitWritten(t, s, []string{o.ID}, 10*time.Second)
		l := waitLedger(t, s, rdb, it.ID, 3*time.Second, func(l ledger) bool { return l.taken == l.sold })
		if l.sold != 1 || l.taken != 1 {
			t.Errorf("after the write: database sold %d, gate taken %d; want 1 and 1", l.sold, l.taken)
		}
	})
}
