package room_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// ConsumeFor spends a live pass only for the user whose ticket it is in
// this line: a pass naming the number for another user (one of a line
// since dropped) is not live for it and leaves the holder admitted; the
// holder's own use spends it.
func TestConsumeForChecksTheHolder(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, 10*time.Second)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 2, t0) // ticket 1 is u1's, 2 is u2's
		wantTickets(t, "admission", admit(t, r, at(0), 1_000_000, 2).Tickets, seq(1, 2))
		if err := r.ConsumeFor(ctx, 1, "u2", at(5)); !errors.Is(err, room.ErrNotLive) {
			t.Errorf("ConsumeFor(1, u2) = %v, want ErrNotLive", err)
		}
		if s := status(t, r, 1, at(6)); s.State != room.StateAdmitted {
			t.Errorf("ticket 1 after another user's ConsumeFor: %s, want admitted", s.State)
		}
		if err := r.ConsumeFor(ctx, 1, "u1", at(7)); err != nil {
			t.Errorf("ConsumeFor(1, u1) = %v, want nil", err)
		}
		if s := status(t, r, 1, at(8)); s.State != room.StateUsed {
			t.Errorf("ticket 1 after its holder's ConsumeFor: %s, want used", s.State)
		}
	})
}
