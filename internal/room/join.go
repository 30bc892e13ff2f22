package room

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Join gives user a place in line, or the place user already has: one
// place per user, whatever the number of calls or instances. It is
// ErrSoldOut once the room closed, ErrNoRoom without a room.
func (r *Room) Join(ctx context.Context, userID string, now time.Time) (Status, error) {
	res, err := r.JoinMany(ctx, []string{userID}, now)
	if err != nil {
		return Status{}, err
	}
	return res[0].Status, res[0].Err
}

// JoinResult is one user's answer of JoinMany: what Join would answer.
type JoinResult struct {
	Status Status
	Err    error
}

// JoinMany is Join for several users in one script call (one round trip,
// one script run): result i is users[i]'s, and a user named twice gets
// the same ticket twice. An invalid user id is refused (ErrInvalid) and
// not sent. The error is the call's: Redis failed (ErrUnavailable) and
// nobody's answer is known; the joins may still have run, and joining
// again finds the same places.
func (r *Room) JoinMany(ctx context.Context, users []string, now time.Time) ([]JoinResult, error) {
	res := make([]JoinResult, len(users))
	args := make([]any, 1, len(users)+1)
	args[0] = now.UnixMilli()
	for i, u := range users {
		if !stock.ValidUserID(u) {
			res[i].Err = fmt.Errorf("%w: user id %q", ErrInvalid, u)
			continue
		}
		args = append(args, u)
	}
	if len(args) == 1 {
		return res, nil
	}
	k := r.k
	v, err := joinScript.Run(ctx, r.rdb, []string{k.meta, k.tickets, k.rank, k.live, k.used, k.users}, args...).Slice()
	if err != nil {
		return nil, unavailable(err)
	}
	if len(v) != len(args)-1 {
		return nil, unavailable(fmt.Errorf("join script answered %d users of %d", len(v), len(args)-1))
	}
	j := 0
	for i := range res {
		if res[i].Err != nil {
			continue
		}
		e, ok := v[j].([]any)
		j++
		if !ok || len(e) == 0 {
			return nil, unavailable(fmt.Errorf("unexpected join script reply %v", v))
		}
		res[i].Status, res[i].Err = r.status(e, now)
		if res[i].Err == nil && res[i].Status.User != users[i] {
			return nil, unavailable(fmt.Errorf("join script gave ticket %d of %q to %q", res[i].Status.Ticket, res[i].Status.User, users[i]))
		}
	}
	return res, nil
}
