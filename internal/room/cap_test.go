package room_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// A room's tickets are bounded (issue 33, sybils): joins from many
// goroutines and two instances at once, in batches, never pass
// JoinManyCapped's bound together; past it a new user gets ErrFull and no
// ticket, a user with a ticket still gets theirs back.
func TestJoinCapBoundsTickets(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		a, b := e.room(t, nil), e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, a, seed, time.Hour)
		const limit, users = 50, 400
		ctx := context.Background()
		var got, full atomic.Int64
		holders := make(chan string, users)
		var wg sync.WaitGroup
		for w := range 8 {
			r := a
			if w%2 == 1 {
				r = b
			}
			wg.Go(func() {
				for i := w; i < users; i += 8 * 4 {
					batch := []string{}
					for k := i; k < min(i+8*4, users); k += 8 {
						batch = append(batch, fmt.Sprintf("u%d", k))
					}
					res, err := r.JoinManyCapped(ctx, batch, t0, limit)
					if err != nil {
						t.Errorf("JoinManyCapped: %v", err)
						return
					}
					for j, x := range res {
						switch {
						case x.Err == nil:
							got.Add(1)
							holders <- batch[j]
						case errors.Is(x.Err, room.ErrFull):
							full.Add(1)
						default:
							t.Errorf("join %s: %v", batch[j], x.Err)
						}
					}
				}
			})
		}
		wg.Wait()
		close(holders)
		if got.Load() != limit || full.Load() != users-limit {
			t.Fatalf("%d joins, bound %d: %d tickets and %d full, want %d and %d", users, limit, got.Load(), full.Load(), limit, users-limit)
		}
		// Past the bound a holder still gets their ticket, a newcomer none.
		for u := range holders {
			res, err := b.JoinManyCapped(ctx, []string{u, "late-" + u}, t0, limit)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Err != nil || res[0].Status.User != u {
				t.Errorf("holder %s joining again past the bound: %+v, want their ticket", u, res[0])
			}
			if !errors.Is(res[1].Err, room.ErrFull) {
				t.Errorf("newcomer past the bound: %+v, want ErrFull", res[1])
			}
		}
		// No bound: joins go on.
		if s := join(t, a, "unbounded", t0); s.Ticket != limit+1 {
			t.Errorf("join without a bound: ticket %d, want %d", s.Ticket, limit+1)
		}
	})
}
