package room_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

func TestJoinOnePlacePerUser(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		a, b := e.room(t, nil), e.room(t, nil)
		setUp(t, a, room.NewSeed(), time.Minute)
		join(t, a, "first", t0)

		// 100 concurrent joins of one user, through two instances.
		var wg sync.WaitGroup
		got := make([]int64, 100)
		errs := make([]error, 100)
		for i := range got {
			r := a
			if i%2 == 1 {
				r = b
			}
			wg.Go(func() {
				s, err := r.Join(ctx, "bob", t0)
				got[i], errs[i] = s.Ticket, err
			})
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("join %d: %v", i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("join %d got ticket %d, join 0 got %d: two places for one user", i, got[i], got[0])
			}
		}
		if got[0] != 2 {
			t.Errorf("bob's ticket = %d, want 2", got[0])
		}
		if s := join(t, b, "carol", t0); s.Ticket != 3 || s.Waiting != 3 {
			t.Errorf("next user: ticket %d, waiting %d; want ticket 3 of 3 waiting", s.Ticket, s.Waiting)
		}
		if s := status(t, a, 2, t0); s.User != "bob" || s.State != room.StateWaiting || s.Drawn {
			t.Errorf("Status(2) = %+v, want bob waiting, not drawn", s)
		}
	})
}

func TestJoinDistinctUsersConcurrently(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		r1, r2 := e.room(t, nil), e.room(t, nil)
		setUp(t, r1, room.NewSeed(), time.Minute)
		const n = 200
		var mu sync.Mutex
		owner := map[int64]string{}
		var wg sync.WaitGroup
		for i := range n {
			r := r1
			if i%2 == 1 {
				r = r2
			}
			wg.Go(func() {
				user := fmt.Sprintf("user-%d", i)
				s, err := r.Join(context.Background(), user, t0)
				if err != nil {
					t.Errorf("Join: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := owner[s.Ticket]; dup {
					t.Errorf("ticket %d given to %s and %s", s.Ticket, prev, user)
				}
				owner[s.Ticket] = user
			})
		}
		wg.Wait()
		for tk := int64(1); tk <= n; tk++ {
			if _, ok := owner[tk]; !ok {
				t.Fatalf("ticket %d never given: tickets are not 1..%d", tk, n)
			}
		}
	})
}

// TestDrawThenFIFO: the pre-queue is served in the draw's order, the
// later joins in arrival order after it, and the room's public draw
// checks out with VerifyDraw.
func TestDrawThenFIFO(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		joinUsers(t, r, 1, 40, t0)

		if d, err := r.Draw(ctx); err != nil || d.Seed != "" || len(d.PreQueue) != 40 || len(d.Served) != 0 {
			t.Fatalf("Draw before opening = %+v, %v; want 40 tickets and no seed", d, err)
		}
		if a := admit(t, r, at(0), 1000, 1000); len(a.Tickets) != 0 {
			t.Fatalf("admitted %v before the opening", a.Tickets)
		}
		if err := r.Open(ctx, seed); err != nil {
			t.Fatalf("Open: %v", err)
		}
		drawn := drawnOrder(t, r, seed, 40)
		later := joinUsers(t, r, 41, 10, at(1))
		wantTickets(t, "tickets after the opening", later, seq(41, 50))

		// Every place is known before anyone is admitted.
		for i, tk := range drawn {
			if s := status(t, r, tk, at(1)); !s.Drawn || s.Position != int64(i+1) || s.Ahead != int64(i) {
				t.Fatalf("Status(%d) = %+v, want drawn at position %d", tk, s, i+1)
			}
		}
		if s := status(t, r, 45, at(1)); s.Position != 45 {
			t.Errorf("ticket 45 after the opening: position %d, want 45", s.Position)
		}

		// Admit a few at a time, through two instances in turn.
		r2 := e.room(t, nil)
		var served []int64
		for ms := int64(0); len(served) < 50; ms += 1000 {
			inst := r
			if ms%2000 == 1000 {
				inst = r2
			}
			a := admit(t, inst, at(1000+ms), 7, 1000)
			if len(a.Tickets) == 0 {
				t.Fatalf("nothing admitted at %d ms with %d served", ms, len(served))
			}
			served = append(served, a.Tickets...)
		}
		wantTickets(t, "served order", served, append(slices.Clone(drawn), later...))

		d, err := r.Draw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Seed != seed.String() || d.Commitment != seed.Commitment() {
			t.Errorf("Draw reveals seed %s commitment %s", d.Seed, d.Commitment)
		}
		wantTickets(t, "Draw's served", d.Served, drawn)
		if c, err := d.Verify(); err != nil || !c.OK() {
			t.Errorf("the room's own draw does not verify: %+v, %v", c, err)
		}
	})
}

func TestOpenRefusesAWrongSeed(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		joinUsers(t, r, 1, 3, t0)
		if err := r.Open(ctx, room.NewSeed()); !errors.Is(err, room.ErrSeedMismatch) {
			t.Fatalf("Open(another seed) = %v, want ErrSeedMismatch", err)
		}
		// Nothing changed: a join still lands in the pre-queue.
		if s := join(t, r, "late", t0); s.Drawn || s.Ticket != 4 {
			t.Errorf("join after the refused opening = %+v, want ticket 4 undrawn", s)
		}
		if err := r.Setup(ctx, room.NewSeed().Commitment(), time.Minute); !errors.Is(err, room.ErrRoomExists) {
			t.Errorf("Setup with another commitment = %v, want ErrRoomExists", err)
		}
		if err := r.Setup(ctx, seed.Commitment(), time.Minute); err != nil {
			t.Errorf("Setup again with the same commitment = %v, want nil", err)
		}
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		if err := r.Open(ctx, seed); err != nil {
			t.Errorf("second Open = %v, want nil", err)
		}
	})
}

func TestCloseAndResume(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		joinUsers(t, r, 1, 6, t0)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		drawn := drawnOrder(t, r, seed, 6)
		a := admit(t, r, at(999), 2, 10)
		if err := r.Consume(ctx, a.Tickets[0], at(999)); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Join(ctx, "newcomer", at(999)); !errors.Is(err, room.ErrSoldOut) {
			t.Errorf("Join when closed = %v, want ErrSoldOut", err)
		}
		if _, err := r.Join(ctx, "u3", at(999)); !errors.Is(err, room.ErrSoldOut) {
			t.Errorf("Join again when closed = %v, want ErrSoldOut", err)
		}
		if _, err := r.Admit(ctx, at(2000), mark(t, r), 2, 10); !errors.Is(err, room.ErrSoldOut) {
			t.Errorf("Admit when closed = %v, want ErrSoldOut", err)
		}
		for i, tk := range drawn {
			want := room.StateSoldOut
			if i == 0 {
				want = room.StateUsed // its pass bought before the last unit went
			}
			if s := status(t, r, tk, at(2000)); s.State != want {
				t.Errorf("ticket %d (drawn %d) when closed: %s, want %s", tk, i+1, s.State, want)
			}
		}
		if err := r.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		wantTickets(t, "admitted after Resume", admit(t, r, at(3999), 2, 10).Tickets, drawn[2:4])
	})
}

func TestPassInStatus(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		key := room.GeneratePassKey()
		r := e.room(t, &room.Options{PassKey: key})
		seed := room.NewSeed()
		setUp(t, r, seed, 30*time.Second)
		if err := r.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		tk := join(t, r, "dora", t0).Ticket
		if s := status(t, r, tk, t0); s.Pass != "" {
			t.Errorf("waiting ticket carries a pass")
		}
		admit(t, r, at(500), 10, 10)
		s := status(t, r, tk, at(600))
		if s.State != room.StateAdmitted || s.Pass == "" {
			t.Fatalf("Status = %+v, want admitted with a pass", s)
		}
		p, err := key.Verify(s.Pass, e.item, "dora", at(600))
		if err != nil {
			t.Fatalf("the room's pass does not verify: %v", err)
		}
		line, err := room.LineOf(seed.Commitment())
		if err != nil {
			t.Fatal(err)
		}
		if p.Line != line || s.Line != line {
			t.Errorf("pass's line %v, status's %v; want the room's %v (its commitment's)", p.Line, s.Line, line)
		}
		if p.Ticket != tk || !p.Expiry.Equal(at(30_000)) || !s.PassExpiry.Equal(at(30_500)) {
			t.Errorf("pass = %+v (room's expiry %v), want ticket %d expiring %v (the room's 30.5 s rounded down)", p, s.PassExpiry, tk, at(30_000))
		}
		if _, err := key.Verify(s.Pass, e.item, "dora", at(30_000)); !errors.Is(err, room.ErrPassExpired) {
			t.Errorf("pass at its expiry = %v, want ErrPassExpired", err)
		}
	})
}

func TestNoRoomAndBadInput(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		if _, err := r.Join(ctx, "x", t0); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Join without a room = %v, want ErrNoRoom", err)
		}
		if _, err := r.Status(ctx, 1, t0); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Status without a room = %v, want ErrNoRoom", err)
		}
		if _, err := r.Admit(ctx, t0, mark(t, r), 1, 1); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Admit without a room = %v, want ErrNoRoom", err)
		}
		if err := r.Open(ctx, room.NewSeed()); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Open without a room = %v, want ErrNoRoom", err)
		}
		if err := r.Close(ctx); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Close without a room = %v, want ErrNoRoom", err)
		}
		if _, err := r.Draw(ctx); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Draw without a room = %v, want ErrNoRoom", err)
		}
		if keys := e.rdb.Keys(ctx, e.prefix+"*").Val(); len(keys) != 0 && !e.b.IsCluster() {
			t.Errorf("calls on a missing room wrote %v", keys)
		}
		seed := room.NewSeed()
		for name, err := range map[string]error{
			"setup short ttl":  r.Setup(ctx, seed.Commitment(), 999*time.Millisecond),
			"setup bad commit": r.Setup(ctx, "ABC", time.Minute),
			"setup upper hex":  r.Setup(ctx, fmt.Sprintf("%X", seed[:]), time.Minute),
			"zero rate":        func() error { _, err := r.Admit(ctx, t0, mark(t, r), 0, 1); return err }(),
			"negative cap":     func() error { _, err := r.Admit(ctx, t0, mark(t, r), 1, -1); return err }(),
			"no mark":          func() error { _, err := r.Admit(ctx, t0, room.Mark{}, 1, 1); return err }(),
			"bad user":         func() error { _, err := r.Join(ctx, "a b", t0); return err }(),
		} {
			if !errors.Is(err, room.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		setUp(t, r, seed, time.Minute)
		if _, err := r.Status(ctx, 99, t0); !errors.Is(err, room.ErrUnknownTicket) {
			t.Errorf("Status(unknown) = %v, want ErrUnknownTicket", err)
		}
		if _, err := room.New(e.rdb, 0, nil); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("New(item 0) = %v, want ErrInvalid", err)
		}
		if _, err := room.New(e.rdb, 1, &room.Options{KeyPrefix: "a{b"}); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("New(prefix with a brace) = %v, want ErrInvalid", err)
		}
		if err := r.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Join(ctx, "x", t0); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Join after Delete = %v, want ErrNoRoom", err)
		}
	})
}

// TestRedisDownFailsClosed: with Redis unreachable every call is a fast
// ErrUnavailable; nobody is told they are in or admitted.
func TestRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:29001", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	r, err := room.New(rdb, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	_, errJoin := r.Join(ctx, "x", t0)
	_, errStatus := r.Status(ctx, 1, t0)
	_, errAdmit := r.Admit(ctx, t0, room.MarkAt(t0), 1, 1)
	_, errMark := r.Mark(ctx)
	for name, err := range map[string]error{
		"join": errJoin, "status": errStatus, "admit": errAdmit, "mark": errMark,
		"open": r.Open(ctx, room.NewSeed()), "consume": r.Consume(ctx, 1, t0), "close": r.Close(ctx),
		"setup": r.Setup(ctx, room.NewSeed().Commitment(), time.Minute),
	} {
		if !errors.Is(err, room.ErrUnavailable) {
			t.Errorf("%s with Redis down = %v, want ErrUnavailable", name, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("seven calls with Redis down took %v: not a fast failure", d)
	}
}

// TestRedisStalledFailsFast: a Redis that hangs costs a caller its
// context's deadline, no more, and the answer is ErrUnavailable. A join
// held by the stall may still run when Redis resumes: the retry then finds
// the same place, never a second one.
func TestRedisStalledFailsFast(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	opt, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr = proxy.Addr()
	opt.ContextTimeoutEnabled = true // as the service's client: a deadline bounds each call
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	r, err := room.New(rdb, 1, &room.Options{KeyPrefix: b.KeyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	seed := room.NewSeed()
	setUp(t, r, seed, time.Minute)

	proxy.Stall()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = r.Join(ctx, "stuck", t0)
	if !errors.Is(err, room.ErrUnavailable) {
		t.Errorf("Join on a stalled Redis = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Join on a stalled Redis took %v, want about its 300 ms deadline", d)
	}
	proxy.Heal()

	s := join(t, r, "stuck", t0)
	if s.Ticket != 1 || s.Waiting != 1 {
		t.Errorf("retry after the stall = ticket %d of %d waiting, want ticket 1 of 1", s.Ticket, s.Waiting)
	}
}
