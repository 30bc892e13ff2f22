package room

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClient is what a Room needs of go-redis: a Client, a ClusterClient
// or a Ring.
type RedisClient interface {
	redis.Scripter
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	GetRange(ctx context.Context, key string, start, end int64) *redis.StringCmd
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
	ZCard(ctx context.Context, key string) *redis.IntCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

var (
	_ RedisClient = (*redis.Client)(nil)
	_ RedisClient = (*redis.ClusterClient)(nil)
	_ RedisClient = (*redis.Ring)(nil)
)

// Room is one item's waiting room. It holds no state of its own: every
// instance builds its own Room for the item and they share Redis.
type Room struct {
	rdb    RedisClient
	itemID int64
	k      keys
	opt    Options
}

// New returns item itemID's room (which Setup creates in Redis).
func New(rdb RedisClient, itemID int64, opt *Options) (*Room, error) {
	o := opt.resolve()
	k, err := newKeys(o.KeyPrefix, itemID)
	if err != nil {
		return nil, err
	}
	return &Room{rdb: rdb, itemID: itemID, k: k, opt: o}, nil
}

// ItemID is the room's item.
func (r *Room) ItemID() int64 { return r.itemID }

// MinPassTTL is the shortest pass lifetime Setup accepts: a pass is signed
// to the second.
const MinPassTTL = time.Second

// Setup creates the room, before its sale opens, with the commitment of
// its draw's seed (Seed.Commitment) and the lifetime of a pass. Setting up
// again with the same commitment does nothing (every instance may call
// it); with another it is ErrRoomExists. Each set-up that creates the
// room draws a new random epoch (Stats.Epoch): a room set up again after
// Redis lost it has the same commitment but another epoch, so what names
// a ticket of the lost line (a ticket string) can tell.
func (r *Room) Setup(ctx context.Context, commitment string, passTTL time.Duration) error {
	_, err := r.SetupCreated(ctx, commitment, passTTL)
	return err
}

// SetupCreated is Setup, and reports whether this call created the room
// (false: it was there already with this commitment).
func (r *Room) SetupCreated(ctx context.Context, commitment string, passTTL time.Duration) (bool, error) {
	if b, err := hex.DecodeString(commitment); err != nil || len(b) != 32 || commitment != hex.EncodeToString(b) {
		return false, fmt.Errorf("%w: a commitment is 64 lowercase hex digits", ErrInvalid)
	}
	if passTTL < MinPassTTL {
		return false, fmt.Errorf("%w: pass ttl %v below %v", ErrInvalid, passTTL, MinPassTTL)
	}
	var epoch [8]byte
	_, _ = rand.Read(epoch[:]) // never fails (crypto/rand)
	res, err := setupScript.Run(ctx, r.rdb, []string{r.k.meta}, commitment, passTTL.Milliseconds(), hex.EncodeToString(epoch[:])).Text()
	if err != nil {
		return false, unavailable(err)
	}
	if res == "conflict" {
		return false, ErrRoomExists
	}
	return res == "ok", nil
}

// holdScript sets the room's admission hold (admit.lua admits nobody
// before it), never shortening one already set.
var holdScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[1], 'hold_ms') or '0')
if tonumber(ARGV[1]) > cur then redis.call('HSET', KEYS[1], 'hold_ms', ARGV[1]) end
return 1`)

// HoldAdmission makes Admit admit nobody before until (by the callers'
// clock, as Admit's now). A room set up again after Redis lost it uses it:
// the passes issued before the loss still verify (they are signed, and
// the line is the same) but the new room does not count them, so it waits
// until they have all expired before it issues more.
func (r *Room) HoldAdmission(ctx context.Context, until time.Time) error {
	n, err := holdScript.Run(ctx, r.rdb, []string{r.k.meta}, until.UnixMilli()).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return ErrNoRoom
	}
	return nil
}

// State is where a ticket stands.
type State string

// The states of a ticket.
const (
	StateWaiting  State = "waiting"  // in line (Drawn false: in the pre-queue, not drawn yet)
	StateAdmitted State = "admitted" // its pass is live until PassExpiry
	StateExpired  State = "expired"  // admitted, but the pass went unused
	StateUsed     State = "used"     // its pass bought (Consume)
	StateSoldOut  State = "sold_out" // the item sold out before this ticket bought
	// StateEnded: the sale ended (ends_at) before this ticket bought. The
	// rooms package tells it from the item; Redis never stores it.
	StateEnded State = "ended"
	// StateHeld: sold out, but a unit may still come back (an unpaid order
	// can be cancelled or expire): not final. Told by the rooms package.
	StateHeld State = "held"
)

// Status is a ticket's state and place.
type Status struct {
	Ticket int64
	State  State
	// Drawn: the ticket has a place in line. False only for a pre-queue
	// ticket before the opening's draw: its place is not known yet.
	Drawn bool
	// Position is 1 for the next ticket to be admitted; 0 unless waiting
	// and drawn.
	Position int64
	// Ahead is how many are admitted before this ticket: Position-1.
	Ahead int64
	// ETASeconds is Position over the last admission rate, rounded up; -1
	// when unknown (not drawn, or no admission yet).
	ETASeconds int64
	// Waiting is how many tickets of the room are not admitted yet.
	Waiting int64
	// User is the ticket's owner: a handler must show a pass to no one else.
	User string
	// PassExpiry is when an admitted ticket's pass expires.
	PassExpiry time.Time
	// Pass is the signed pass of an admitted ticket, when Options.PassKey is
	// set.
	Pass string
	// Line is the line the ticket is in (a pass carries it); zero when
	// Redis holds no valid commitment.
	Line Line
}

// Status is ticket's state and place at now.
func (r *Room) Status(ctx context.Context, ticket int64, now time.Time) (Status, error) {
	if ticket <= 0 {
		return Status{}, fmt.Errorf("%w: ticket %d", ErrUnknownTicket, ticket)
	}
	k := r.k
	v, err := statusScript.Run(ctx, r.rdb, []string{k.meta, k.tickets, k.rank, k.live, k.used, k.deferred, k.claim}, ticket, now.UnixMilli()).Slice()
	if err != nil {
		return Status{}, unavailable(err)
	}
	return r.status(v, now)
}

// status reads ticket.lua's reply: {state, position, user, pass expiry ms,
// rate, waiting, drawn, ticket, commitment}, or {code} first for a refusal.
func (r *Room) status(v []any, now time.Time) (Status, error) {
	code, _ := v[0].(string)
	switch code {
	case "noroom":
		return Status{}, ErrNoRoom
	case "unknown":
		return Status{}, ErrUnknownTicket
	case "sold_out":
		if len(v) == 1 {
			return Status{}, ErrSoldOut
		}
	}
	if len(v) != 9 {
		return Status{}, unavailable(fmt.Errorf("unexpected script reply %v", v))
	}
	s := Status{
		State:      State(code),
		User:       v[2].(string),
		ETASeconds: -1,
		Waiting:    v[5].(int64),
		Drawn:      v[6].(int64) == 1,
		Ticket:     v[7].(int64),
	}
	s.setPlace(v[1].(int64), v[4].(int64))
	commitment, _ := v[8].(string)
	line, lineErr := LineOf(commitment)
	if lineErr == nil {
		s.Line = line
	}
	if s.State == StateAdmitted {
		s.PassExpiry = time.UnixMilli(v[3].(int64))
		if len(r.opt.PassKey.key) > 0 {
			if lineErr != nil {
				// No line to bind the pass to: sign none.
				return Status{}, unavailable(fmt.Errorf("room %d has no valid commitment: %w", r.itemID, lineErr))
			}
			p, err := r.opt.PassKey.Issue(Pass{ItemID: r.itemID, UserID: s.User, Ticket: s.Ticket, Expiry: s.PassExpiry, Line: line})
			if err != nil {
				return Status{}, err
			}
			s.Pass = p
		}
	}
	return s, nil
}

// setPlace sets a waiting ticket's position (0: none) and what follows
// from it at the last admission rate.
func (s *Status) setPlace(position, rate int64) {
	s.Position = position
	if position > 0 {
		s.Ahead = position - 1
		if rate > 0 {
			s.ETASeconds = (position + rate - 1) / rate
		}
	}
}

// Consume marks ticket's pass used, once its order was taken: its slot
// among the live passes frees at once. It is ErrPassUsed the second time
// and ErrNotLive for a pass never admitted or expired (at now).
func (r *Room) Consume(ctx context.Context, ticket int64, now time.Time) error {
	return r.ConsumeFor(ctx, ticket, "", now)
}

// ConsumeFor is Consume of a pass signed for user: ErrNotLive unless
// ticket is user's in this line (a pass of a line since dropped may name
// a number that is another user's now). "" checks no holder.
func (r *Room) ConsumeFor(ctx context.Context, ticket int64, user string, now time.Time) error {
	res, err := consumeScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.live, r.k.used, r.k.spent, r.k.tickets}, ticket, now.UnixMilli(), user).Text()
	if err != nil {
		return unavailable(err)
	}
	switch res {
	case "ok":
		return nil
	case "used":
		return ErrPassUsed
	case "noroom":
		return ErrNoRoom
	}
	return ErrNotLive
}

// Close closes the room because the item sold out: joins are ErrSoldOut,
// nobody is admitted, and every ticket not yet used reads sold_out.
func (r *Room) Close(ctx context.Context) error { return r.setClosed(ctx, "1") }

// Resume undoes Close when stock came back (a cancel, an expiry, a
// restock): admission goes on where it stopped, in the same order.
func (r *Room) Resume(ctx context.Context) error { return r.setClosed(ctx, "0") }

func (r *Room) setClosed(ctx context.Context, v string) error {
	res, err := closeScript.Run(ctx, r.rdb, []string{r.k.meta}, v).Text()
	if err != nil {
		return unavailable(err)
	}
	if res == "noroom" {
		return ErrNoRoom
	}
	return nil
}

// Delete removes the room and every ticket in it.
func (r *Room) Delete(ctx context.Context) error {
	// The keys share a slot, so one DEL is fine on a Redis Cluster.
	if err := r.rdb.Del(ctx, r.k.all()...).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// unavailable turns a Redis error into the room's: the caller fails closed.
func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
