package handler

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// validatingRooms is a room that, like rooms.Service, refuses an invalid
// user id with room.ErrInvalid, so a route that passes one on shows it.
type validatingRooms struct{ joinCountingRooms }

func (r *validatingRooms) Join(ctx context.Context, v *stock.ItemView, user string) (*rooms.Ticket, error) {
	if !stock.ValidUserID(user) {
		return nil, fmt.Errorf("%w: user id %q", room.ErrInvalid, user)
	}
	return r.joinCountingRooms.Join(ctx, v, user)
}

// TestRoomTokenSubject (redteam #9): in JWT mode a token whose sub is not
// a valid user id is 400 invalid_request on join and challenge, as on the
// order path, never a 500; and room.ErrInvalid has its 400 in the table.
func TestRoomTokenSubject(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	key := room.GeneratePassKey()
	issue, check := powConfig(key)
	rs := &validatingRooms{joinCountingRooms{roomed: map[int64]bool{1: true}}}
	plain := newTestHandler(t, answeringShop(), Config{Rooms: rs, UserJWTSecret: secret})
	pow := newTestHandler(t, answeringShop(), Config{Rooms: rs, UserJWTSecret: secret, RoomPoW: check, RoomChallenge: issue})
	for _, sub := range []string{"alice bob", "alïce", strings.Repeat("x", stock.MaxUserIDLen+1), "tab\there"} {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		auth := map[string]string{"Authorization": "Bearer " + tok}
		if a := call(plain, "POST", "/api/v1/items/1/queue", "", auth); a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
			t.Errorf("join, sub %q: got %d %s, want 400 invalid_request", sub, a.status, a.body)
		}
		if a := call(pow, "GET", "/api/v1/items/1/queue/challenge", "", auth); a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
			t.Errorf("challenge, sub %q: got %d %s, want 400 invalid_request", sub, a.status, a.body)
		}
	}
	if len(rs.joins) != 0 {
		t.Errorf("invalid subjects joined: %q", rs.joins)
	}
	if code := ErrorCode(fmt.Errorf("x: %w", room.ErrInvalid)); code != CodeInvalidRequest {
		t.Errorf("room.ErrInvalid is answered %q, want %q", code, CodeInvalidRequest)
	}
}

// deadlineRooms records the deadline each room step was given.
type deadlineRooms struct {
	answeringRooms
	mu        sync.Mutex
	deadlines map[string]time.Time
}

func (r *deadlineRooms) record(step string, ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Time{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines[step] = dl
}

func (r *deadlineRooms) Join(ctx context.Context, v *stock.ItemView, user string) (*rooms.Ticket, error) {
	r.record("join", ctx)
	return r.answeringRooms.Join(ctx, v, user)
}
func (r *deadlineRooms) Status(ctx context.Context, v *stock.ItemView, tk string) (*rooms.Ticket, error) {
	r.record("status", ctx)
	return r.answeringRooms.Status(ctx, v, tk)
}
func (r *deadlineRooms) Draw(ctx context.Context, id int64) (*rooms.Draw, error) {
	r.record("draw", ctx)
	return r.answeringRooms.Draw(ctx, id)
}

// TestRoomRedisBudget (redteam #8): a room request's Redis steps share one
// budget (RoomRedisBudget, the app's SECKILL_REDIS_TIMEOUT): the room's own
// step gets what the item view's read left, not a fresh timeout, so a
// stalled Redis answers 503 within one budget, not two; and an item view
// that ran out of it is a 503 unavailable, not a 500.
func TestRoomRedisBudget(t *testing.T) {
	t.Parallel()
	const budget = time.Hour // long: nothing here waits for it
	routes := []struct{ step, method, path, body string }{
		{"join", "POST", "/api/v1/items/1/queue", `{"user_id":"alice"}`},
		{"status", "GET", "/api/v1/items/1/queue/t", ""},
		{"draw", "GET", "/api/v1/items/1/draw", ""},
	}
	for _, rt := range routes {
		shop := answeringShop()
		var viewDeadline time.Time
		shop.itemView = func(ctx context.Context, id int64) (*stock.ItemView, error) {
			viewDeadline, _ = ctx.Deadline()
			return &stock.ItemView{ID: id, Name: "widget", Remaining: 8}, nil
		}
		rs := &deadlineRooms{deadlines: map[string]time.Time{}}
		// The request timeout is longer than the budget, so only the
		// budget can give the steps a deadline this near.
		h := newTestHandler(t, shop, Config{Rooms: rs, RoomRedisBudget: budget, RequestTimeout: 3 * budget})
		start := time.Now()
		if a := call(h, rt.method, rt.path, rt.body, nil); a.status != http.StatusOK {
			t.Fatalf("%s: got %d %s, want 200", rt.step, a.status, a.body)
		}
		got := rs.deadlines[rt.step]
		switch {
		case viewDeadline.IsZero() || got.IsZero():
			t.Errorf("%s: item view's deadline %v, room step's %v: want both bounded", rt.step, viewDeadline, got)
		case !got.Equal(viewDeadline):
			t.Errorf("%s: room step's deadline %v, item view's %v: want the one shared budget", rt.step, got, viewDeadline)
		case got.After(time.Now().Add(budget)) || got.Before(start.Add(budget)):
			t.Errorf("%s: deadline %v: want the budget from the request's start (%v)", rt.step, got, start.Add(budget))
		}

		// The item view's read ran out of the budget (a stalled gate).
		stalled := answeringShop()
		stalled.itemView = func(ctx context.Context, id int64) (*stock.ItemView, error) {
			return nil, context.DeadlineExceeded
		}
		rs2 := &deadlineRooms{deadlines: map[string]time.Time{}}
		h2 := newTestHandler(t, stalled, Config{Rooms: rs2, RoomRedisBudget: budget})
		if a := call(h2, rt.method, rt.path, rt.body, nil); a.status != http.StatusServiceUnavailable || a.code() != CodeUnavailable {
			t.Errorf("%s, item view out of time: got %d %s, want 503 unavailable", rt.step, a.status, a.body)
		}
		if len(rs2.deadlines) != 0 {
			t.Errorf("%s: the room was asked after the budget ran out: %v", rt.step, rs2.deadlines)
		}
	}
}

// TestRoomEventsLastAMinute (redteam #11): a ticket's event stream is
// bounded by its own minute (API.md), not by the request timeout, which
// would end it after about 8 s at the 10 s default: the reads of the
// stream get a deadline a minute out although the request timeout is 10 s.
func TestRoomEventsLastAMinute(t *testing.T) {
	t.Parallel()
	rs := &deadlineRooms{deadlines: map[string]time.Time{}}
	h := newTestHandler(t, answeringShop(), Config{Rooms: rs, RequestTimeout: 10 * time.Second})
	start := time.Now()
	a := call(h, "GET", "/api/v1/items/1/queue/t/events", "", nil)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), "event: status") {
		t.Fatalf("got %d %s, want 200 and a status event", a.status, a.body)
	}
	got := rs.deadlines["status"]
	if got.IsZero() || got.Before(start.Add(roomEventsMaxStream)) {
		t.Errorf("the stream's reads end at %v, %v after the request: want at least %v", got, got.Sub(start), roomEventsMaxStream)
	}
}

// replayCountingRooms admits every order as a keyed retry to confirm,
// and counts the database reads its Confirm stands for.
type replayCountingRooms struct {
	answeringRooms
	replays atomic.Int64
}

func (r *replayCountingRooms) Admit(stock.OrderRequest, string) (rooms.Admission, error) {
	return replayToConfirm{r}, nil
}

type replayToConfirm struct{ r *replayCountingRooms }

func (a replayToConfirm) Replay() bool { return true }
func (a replayToConfirm) Confirm(context.Context) error {
	a.r.replays.Add(1)
	return room.ErrPassMissing
}
func (replayToConfirm) Passed() bool                               { return false }
func (replayToConfirm) Refused(_ context.Context, err error) error { return err }
func (replayToConfirm) Done(context.Context, bool)                 {}

// A pass-less keyed order of a roomed item costs a database read (is it a
// retry of an order taken under that key?): the read comes after the rate
// limits (redteam learn_amplify.py: 200 fresh keys, 200 reads before any
// limit), so a user over the limit is 429 without one.
func TestReplayReadAfterRateLimits(t *testing.T) {
	t.Parallel()
	srv, err := embedredis.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	limit, _ := ratelimit.Parse("1/h:1")
	rs := &replayCountingRooms{}
	h := newTestHandler(t, answeringShop(), Config{Rooms: rs, UserLimit: ratelimit.New(rdb, "t:", limit, nil)})
	order := func(key string) answer {
		return call(h, "POST", "/api/v1/items/1/orders", `{"user_id":"mallory"}`, map[string]string{"Idempotency-Key": key})
	}
	if a := order("k-0"); a.status != http.StatusForbidden || a.code() != CodePassRequired {
		t.Fatalf("first pass-less keyed order: got %d %s, want 403 pass_required", a.status, a.body)
	}
	if n := rs.replays.Load(); n != 1 {
		t.Fatalf("first order: %d replay reads, want 1", n)
	}
	for i := 1; i <= 20; i++ {
		if a := order(fmt.Sprintf("k-%d", i)); a.status != http.StatusTooManyRequests {
			t.Fatalf("order %d over the user's limit: got %d %s, want 429", i, a.status, a.body)
		}
	}
	if n := rs.replays.Load(); n != 1 {
		t.Errorf("20 orders over the limit made %d more replay reads, want none", n-1)
	}
}

// fullRooms is a room that holds its bound of tickets.
type fullRooms struct{ answeringRooms }

func (fullRooms) Join(context.Context, *stock.ItemView, string) (*rooms.Ticket, error) {
	return nil, rooms.ErrRoomFull
}

// A join past the room's bound on tickets is 409 room_full.
func TestJoinRoomFull(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, answeringShop(), Config{Rooms: fullRooms{}})
	if a := call(h, "POST", "/api/v1/items/1/queue", `{"user_id":"late"}`, nil); a.status != http.StatusConflict || a.code() != CodeRoomFull {
		t.Errorf("join of a full room: got %d %s, want 409 room_full", a.status, a.body)
	}
}
