package room_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// JoinMany answers each user as Join would, in one call: a user named
// twice gets one ticket, a bad id is refused alone, a user who joined
// before keeps the place, and an admitted one gets the pass; without the
// room or once it closed, every user hears so.
func TestJoinMany(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, &room.Options{PassKey: room.GeneratePassKey()})
		if res, err := r.JoinMany(ctx, []string{"ann", "ben"}, t0); err != nil || !errors.Is(res[0].Err, room.ErrNoRoom) || !errors.Is(res[1].Err, room.ErrNoRoom) {
			t.Fatalf("JoinMany without a room: %v, %+v; want ErrNoRoom each", err, res)
		}
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		join(t, r, "old", t0)

		res, err := r.JoinMany(ctx, []string{"ann", "a b", "old", "ben", "ann"}, t0)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			user   string
			ticket int64
		}{{"ann", 2}, {"", 0}, {"old", 1}, {"ben", 3}, {"ann", 2}}
		for i, w := range want {
			got := res[i]
			if w.user == "" {
				if !errors.Is(got.Err, room.ErrInvalid) {
					t.Errorf("entry %d (a bad id): %v, want ErrInvalid", i, got.Err)
				}
				continue
			}
			if got.Err != nil || got.Status.User != w.user || got.Status.Ticket != w.ticket || got.Status.State != room.StateWaiting {
				t.Errorf("entry %d: %+v %v, want %s waiting with ticket %d", i, got.Status, got.Err, w.user, w.ticket)
			}
		}
		if res[4].Status.Waiting != 3 {
			t.Errorf("waiting after the batch: %d, want 3", res[4].Status.Waiting)
		}
		for _, i := range []int{0, 2, 3, 4} {
			sameAsStatus(t, r, res[i].Status, t0)
		}
		if res, err := r.JoinMany(ctx, []string{"a b"}, t0); err != nil || !errors.Is(res[0].Err, room.ErrInvalid) {
			t.Errorf("JoinMany of a bad id alone: %v, %v; want ErrInvalid and no call", err, res)
		}
		// A long call (the script reads and writes in parts of 500): 1,200
		// new users, each named twice, and one who joined before.
		var many []string
		for i := range 1200 {
			many = append(many, fmt.Sprintf("m%d", i))
		}
		many = append(append(many, many...), "ben")
		res, err = r.JoinMany(ctx, many, t0)
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range many {
			want := int64(4 + i%1200)
			if u == "ben" {
				want = 3
			}
			if res[i].Err != nil || res[i].Status.Ticket != want || res[i].Status.User != u {
				t.Fatalf("long call, entry %d (%s): ticket %d of %s (%v), want %d", i, u, res[i].Status.Ticket, res[i].Status.User, res[i].Err, want)
			}
		}
		if s := status(t, r, 1203, t0); s.User != "m1199" || s.Waiting != 1203 {
			t.Errorf("ticket 1203 after the long call: %s, %d waiting; want m1199, 1203", s.User, s.Waiting)
		}
		if s := join(t, r, "m600", t0); s.Ticket != 604 {
			t.Errorf("m600 joins again: ticket %d, want 604", s.Ticket)
		}

		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		first := admit(t, r, at(999), 1, 10).Tickets[0]
		who := status(t, r, first, at(999)).User
		res, err = r.JoinMany(ctx, []string{"late", who}, at(1000))
		if err != nil {
			t.Fatal(err)
		}
		if s := res[0].Status; res[0].Err != nil || s.Ticket != 1204 || s.Position != 1203 || !s.Drawn || s.Waiting != 1203 {
			t.Errorf("a join after the opening: %+v %v, want ticket 1204 at position 1203 of 1203 waiting", s, res[0].Err)
		}
		if s := res[1].Status; res[1].Err != nil || s.Ticket != first || s.State != room.StateAdmitted || s.Pass == "" {
			t.Errorf("the admitted user joins again: %+v %v, want ticket %d admitted with its pass", s, res[1].Err, first)
		}
		if res[0].Status.ETASeconds != 1203 {
			t.Errorf("a join after the opening: ETA %d s, want 1203 (at 1 a second)", res[0].Status.ETASeconds)
		}
		sameAsStatus(t, r, res[0].Status, at(1000))

		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		res, err = r.JoinMany(ctx, []string{"new", "ann"}, at(1000))
		if err != nil || !errors.Is(res[0].Err, room.ErrSoldOut) || !errors.Is(res[1].Err, room.ErrSoldOut) {
			t.Errorf("JoinMany once closed: %v, %+v; want ErrSoldOut each", err, res)
		}
	})
}

// sameAsStatus checks a join's answer against Status of its ticket (the
// script answers a new ticket without reading it back), all but Waiting,
// which counts the tickets taken until the join.
func sameAsStatus(t *testing.T, r *room.Room, got room.Status, now time.Time) {
	t.Helper()
	want := status(t, r, got.Ticket, now)
	got.Waiting = want.Waiting
	if got != want {
		t.Errorf("join answered %+v, Status answers %+v", got, want)
	}
}
