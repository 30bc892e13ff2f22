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
	return r.JoinManyCapped(ctx, users, now, 0)
}

// JoinManyCapped is JoinMany in a room that holds at most maxTickets
// tickets (0: no bound): past it a user without a ticket is refused
// ErrFull, one with a ticket still gets theirs. The script checks the
// bound with the count, so concurrent joins never pass it together.
func (r *Room) JoinManyCapped(ctx context.Context, users []string, now time.Time, maxTickets int64) ([]JoinResult, error) {
	res := make([]JoinResult, len(users))
	args := make([]any, 2, len(users)+2)
	args[0], args[1] = now.UnixMilli(), max(0, maxTickets)
	for i, u := range users {
		if !stock.ValidUserID(u) {
			res[i].Err = fmt.Errorf("%w: user id %q", ErrInvalid, u)
			continue
		}
		args = append(args, u)
	}
	if len(args) == 2 {
		return res, nil
	}
	k := r.k
	v, err := joinScript.Run(ctx, r.rdb, []string{k.meta, k.tickets, k.rank, k.live, k.used, k.users, k.deferred, k.claim}, args...).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	if code, ok := v.(string); ok { // the whole call refused
		var err error
		switch code {
		case "noroom":
			err = ErrNoRoom
		case "sold_out":
			err = ErrSoldOut
		default:
			return nil, unavailable(fmt.Errorf("unexpected join script reply %q", code))
		}
		for i := range res {
			if res[i].Err == nil {
				res[i].Err = err
			}
		}
		return res, nil
	}
	reply, _ := v.([]any)
	var hdr, entries []any
	if len(reply) == 2 {
		hdr, _ = reply[0].([]any)
		entries, _ = reply[1].([]any)
	}
	if len(hdr) != 4 || len(entries) != len(args)-2 {
		return nil, unavailable(fmt.Errorf("unexpected join script reply %v", v))
	}
	drawn, head, rate := hdr[0].(int64) == 1, hdr[1].(int64), hdr[2].(int64)
	commitment, _ := hdr[3].(string)
	line, _ := LineOf(commitment) // zero when Redis holds no valid one, as Status's
	j := 0
	for i := range res {
		if res[i].Err != nil {
			continue
		}
		switch e := entries[j].(type) {
		case int64: // a new ticket
			res[i].Status = Status{Ticket: e, State: StateWaiting, Drawn: drawn, Waiting: e - head, User: users[i], ETASeconds: -1, Line: line}
			if drawn {
				res[i].Status.setPlace(e-head, rate)
			}
		case []any:
			res[i].Status, res[i].Err = r.status(e, now)
		case string:
			if e != "full" {
				return nil, unavailable(fmt.Errorf("unexpected join script reply %v", v))
			}
			res[i].Err = ErrFull
			j++
			continue
		default:
			return nil, unavailable(fmt.Errorf("unexpected join script reply %v", v))
		}
		j++
		if res[i].Err == nil && res[i].Status.User != users[i] {
			return nil, unavailable(fmt.Errorf("join script gave ticket %d of %q to %q", res[i].Status.Ticket, res[i].Status.User, users[i]))
		}
	}
	return res, nil
}
