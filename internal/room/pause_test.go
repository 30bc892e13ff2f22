package room_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// A paused room admits nobody, whatever the caller's maxUnused, while
// expired passes still leave; resumed, the line goes on where it stopped,
// at most at the rate cap whatever rate the caller passes.
func TestSetControl(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		if err := r.SetControl(ctx, true, 0); !errors.Is(err, room.ErrNoRoom) {
			t.Fatalf("SetControl without a room: %v, want ErrNoRoom", err)
		}
		seed := room.NewSeed()
		setUp(t, r, seed, time.Second)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 3, t0)
		wantTickets(t, "first admission", admit(t, r, at(0), 1000, 1).Tickets, []int64{1})
		if err := r.SetControl(ctx, true, 0); err != nil {
			t.Fatal(err)
		}
		a := admit(t, r, at(2000), 1000, 100) // ticket 1's pass expired at 1000
		wantTickets(t, "paused", a.Tickets, nil)
		if a.Expired != 1 {
			t.Errorf("paused: %d passes expired, want 1 (they leave while paused)", a.Expired)
		}
		if err := r.SetControl(ctx, false, 1); err != nil {
			t.Fatal(err)
		}
		wantTickets(t, "resumed, capped at 1 a second", admit(t, r, at(3500), 1000, 100).Tickets, []int64{2})
		wantTickets(t, "same second", admit(t, r, at(3900), 1000, 100).Tickets, nil)
		if err := r.SetControl(ctx, false, 0); err != nil {
			t.Fatal(err)
		}
		wantTickets(t, "cap lifted", admit(t, r, at(3950), 1000, 100).Tickets, []int64{3})
		if err := r.SetControl(ctx, false, -1); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("rate cap -1: %v, want ErrInvalid", err)
		}
	})
}
