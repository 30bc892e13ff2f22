package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
)

// A gate is rebuilt from the database when it is missing (at creation,
// after Redis lost data, a bucket lost alone) and as a reconcile's repair
// of an item with several buckets. Rebuild is the one way it is built, for
// every strategy and bucket count, so every build restores all that a gate
// holds: stock, taken, the sale window, the released set and the buyers.
// A gate without its buyers lets earlier buyers through again: each holds
// a unit until the database refuses them, and a new buyer hears a false
// sold_out meanwhile.
//
// Cost: the buyers are staged in slices of stageSlice fields, stageDepth
// slices a round trip, then each bucket is installed by one script
// (rebuild.lua) whose RENAME is O(1). BenchmarkRebuild measures it; see
// docs/DESIGN.md for the figure for a million buyers. Until a bucket is
// installed it has no meta, so every script on it answers "missing" and
// its caller waits for the rebuild (Builds), or answers 503 when its own
// deadline comes first: never an answer from a half-built gate.

// Rebuild is what a gate is rebuilt from: a database snapshot read under
// the item's row lock, and what the caller counts in flight.
type Rebuild struct {
	Item *stock.Item // stock, sold, buckets, sale window
	// Buyers is the database's: user -> order id of every order row (a
	// cancelled order's user still holds their one order).
	Buyers map[string]string
	// Done holds the ids of the orders the database has, written or
	// recorded as failed.
	Done map[string]bool
	// Cancelled holds the ids of the cancelled orders: sold left them
	// out, so their units are back (released).
	Cancelled []string
	// Queued are orders admitted but not in the database yet that the
	// caller read (lua-async: its streams), user -> order id; each holds
	// a unit. A user the database has already is skipped.
	Queued map[string]string
	// KeepHeld keeps the reservations the gate still holds for orders
	// not in Done (lua: their writes are in flight, and their hand-backs
	// must stay exact); each holds a unit. One handed back before its
	// bucket is installed is not kept.
	KeepHeld bool
	// Epoch is the item's queue epoch, which lua-async stamps on entries.
	Epoch int64
	// Epochs, when it has one per bucket, replaces Epoch: bucket b's
	// queue epoch (a lua-async item with bucket rows, item_stock's
	// queue_epoch of row b).
	Epochs []int64
	// Roomed: the item has a waiting room (item_rooms, read under the
	// lock); a lua-async gate is built with its room mark (see MarkRoom).
	Roomed bool
}

const (
	stageSlice = 1000 // fields (or members) of one staging command
	stageDepth = 16   // staging commands a round trip
	stageTTL   = 10 * time.Minute
)

// held is a reservation a bucket holds for an order not in the database.
type held struct{ user, order string }

// Rebuild replaces every bucket of the item's gate by one built from r,
// and reports how many held reservations it kept. The caller holds the
// item's row lock in the database: no order commits and no other rebuild
// runs meanwhile.
//
// The metas go first, so that every script finds its bucket missing until
// the bucket is installed whole: no reservation, release or move starts
// meanwhile, and a hand-back gives nothing back (the install sees it; see
// rebuild.lua). Then the buyers (each in its home bucket) and the
// cancelled orders (each in its release bucket) are staged under
// temporary keys, and each bucket installed by one script. An installed
// bucket of several serves its own buyers and units exactly; anything
// that needs every bucket (a move, a sold-out answer) finds one missing
// and waits for the rest. A hand-back in an installed bucket whose unit
// goes back to one not yet installed finds it missing; once every bucket
// is installed, Rebuild gives those units back (finishHandBacks).
//
// The units: taken is sold plus what is in flight (queued, held); the free
// units are spread evenly over the buckets, a bucket's held reservations
// counted as taken in that bucket first.
func (g *Gate) Rebuild(ctx context.Context, r Rebuild) (kept int64, err error) {
	it := r.Item
	k := max(1, it.Buckets)
	bks := AllBuckets(it.ID, k)
	if err := g.clearMetas(ctx, bks); err != nil {
		return 0, err
	}
	heldBy := make([][]held, k)
	if r.KeepHeld {
		for b, bk := range bks {
			if heldBy[b], err = g.heldIn(ctx, g.keys.Bucket(bk).Buyers, r); err != nil {
				return 0, err
			}
		}
	}

	tag := randomHex(6)
	st := &stager{g: g, ctx: ctx}
	staged := make([]struct{ buyers, released string }, k)
	for b, bk := range bks {
		base := g.keys.Bucket(bk).base + ":rebuild:" + tag
		staged[b].buyers, staged[b].released = base+":buyers", base+":released"
	}
	inFlight := make([]int64, k)
	for b := range heldBy {
		inFlight[b] = int64(len(heldBy[b]))
	}
	for u, o := range r.Buyers {
		if err := st.hset(staged[HomeBucket(it.ID, k, u).B].buyers, u, o); err != nil {
			return 0, err
		}
	}
	for u, o := range r.Queued {
		if r.Buyers[u] != "" {
			continue // will fail as already_purchased: holds no unit
		}
		b := HomeBucket(it.ID, k, u).B
		if err := st.hset(staged[b].buyers, u, o); err != nil {
			return 0, err
		}
		inFlight[b]++
	}
	for _, o := range r.Cancelled {
		if err := st.sadd(staged[ReleaseBucket(it.ID, k, o).B].released, o); err != nil {
			return 0, err
		}
	}
	if err := st.flush(); err != nil {
		return 0, err
	}

	taken := plannedTaken(it.Stock, it.Sold, inFlight)
	built := randomHex(6)
	keptBy := make([][]held, k)
	for b, bk := range bks {
		keys := g.keys.Bucket(bk)
		ks := []string{keys.Meta, keys.Buyers, keys.Released, keys.Out, staged[b].buyers, staged[b].released}
		epoch := r.Epoch
		if len(r.Epochs) == k {
			epoch = r.Epochs[b]
		}
		args := []any{share(it.Stock, k, b), taken[b], unixMilli(it.StartsAt), unixMilli(it.EndsAt), built, epoch, roomFlag(r)}
		for _, h := range heldBy[b] {
			ks = append(ks, keys.void(h.order))
			args = append(args, h.user, h.order)
		}
		res, err := rebuildScript.Run(ctx, g.rdb, ks, args...).Slice()
		if err != nil {
			return kept, Error("rebuild: install bucket", err)
		}
		status, data, err := Reply(res)
		if err != nil || status != "built" || len(data) < 1 {
			return kept, fmt.Errorf("redis: rebuild: unexpected reply %v (%v)", res, err)
		}
		n, _ := data[0].(int64)
		kept += n
		keptBy[b] = keptHeld(heldBy[b], data[1:])
	}
	if err := g.finishHandBacks(ctx, it.ID, k, built, keptBy); err != nil {
		// A unit given up between two installs may still count as taken:
		// the gate is not whole. Its metas go again, so the next caller
		// rebuilds, and that install sees the void markers.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clearTimeout)
		defer cancel()
		if cerr := g.clearMetas(cctx, bks); cerr != nil {
			err = fmt.Errorf("%w (and the gate could not be cleared again: %w)", err, cerr)
		}
		return kept, err
	}
	return kept, nil
}

// clearTimeout bounds clearing a gate whose rebuild failed at its end.
const clearTimeout = 5 * time.Second

// ClearMetas deletes the metas of every bucket of an item of k buckets:
// every script answers "missing" on them until the next Rebuild. A
// lua-async rebuild clears them before it reads the streams, so no bucket
// queues an order the read could miss.
func (g *Gate) ClearMetas(ctx context.Context, itemID int64, k int) error {
	return g.clearMetas(ctx, AllBuckets(itemID, k))
}

// clearMetas deletes the metas of bks: every script answers "missing" on
// them until the next rebuild.
func (g *Gate) clearMetas(ctx context.Context, bks []Bucket) error {
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, bk := range bks {
			p.Del(ctx, g.keys.Bucket(bk).Meta)
		}
		return nil
	})
	if err != nil {
		return Error("rebuild: clear gate", err)
	}
	return nil
}

// keptHeld is those of hs whose order ids the install replied as kept.
func keptHeld(hs []held, orders []any) []held {
	ids := make(map[string]bool, len(orders))
	for _, o := range orders {
		if s, ok := o.(string); ok {
			ids[s] = true
		}
	}
	var out []held
	for _, h := range hs {
		if ids[h.order] {
			out = append(out, h)
		}
	}
	return out
}

// finishHandBacks finishes the hand-backs of reservations the rebuild
// kept (keptBy[b]: in bucket b, installed in build built) that came after
// their home bucket was installed: their void marker is set now, and was
// not at the install. Such a hand-back whose release bucket was installed
// later found it missing and released nothing; the install counted the
// unit taken. So the unit is released here, in the build it was kept in,
// and the buyer entry dropped, as the hand-back would have. The released
// set makes it once with a hand-back's own release that came after the
// release bucket's install; a rebuild since then answers 'stale' (it
// counted the unit itself), a bucket lost since 'missing' (the next
// rebuild will). A reservation whose release bucket is its home needs
// nothing: its hand-back is one script.
func (g *Gate) finishHandBacks(ctx context.Context, itemID int64, k int, built string, keptBy [][]held) error {
	type check struct {
		home Bucket
		h    held
		void *redis.IntCmd
	}
	var checks []check
	for b, hs := range keptBy {
		home := Bucket{Item: itemID, B: b, K: k}
		for _, h := range hs {
			if ReleaseBucket(itemID, k, h.order) != home {
				checks = append(checks, check{home: home, h: h})
			}
		}
	}
	if len(checks) == 0 {
		return nil
	}
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range checks {
			checks[i].void = p.Exists(ctx, g.keys.Bucket(checks[i].home).void(checks[i].h.order))
		}
		return nil
	})
	if err != nil {
		return Error("rebuild: read hand-backs", err)
	}
	for _, c := range checks {
		if c.void.Val() == 0 {
			continue
		}
		rkeys := g.keys.Bucket(ReleaseBucket(itemID, k, c.h.order))
		status, err := runStatus(ctx, g.rdb, releaseScript, "rebuild: finish hand-back", []string{rkeys.Meta, rkeys.Released}, c.h.order, built)
		if err != nil {
			return err
		}
		switch status {
		case "stale":
			continue // rebuilt since: that rebuild settled the entry too
		case "released", "already", "missing":
		default:
			return statusError("rebuild: finish hand-back", itemID, status)
		}
		if _, err := runStatus(ctx, g.rdb, dropBuyerScript, "rebuild: finish hand-back", []string{g.keys.Bucket(c.home).Buyers}, c.h.user, c.h.order); err != nil {
			return err
		}
	}
	return nil
}

// heldIn reads a bucket's buyers hash, in pages, for the reservations it
// holds for orders the database does not have.
func (g *Gate) heldIn(ctx context.Context, key string, r Rebuild) ([]held, error) {
	var out []held
	seen := map[string]bool{}
	var cursor uint64
	for {
		kv, next, err := g.rdb.HScan(ctx, key, cursor, "", stageSlice).Result()
		if err != nil {
			return nil, Error("rebuild: read held reservations", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			u, o := kv[i], kv[i+1]
			if seen[u] || r.Done[o] || r.Buyers[u] != "" || r.Queued[u] != "" {
				continue
			}
			seen[u] = true
			out = append(out, held{u, o})
		}
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// plannedTaken is each bucket's taken units for a gate of stock units,
// sold of them in the database and inFlight[b] more held in bucket b: the
// free units spread evenly, but a bucket's taken never below what it holds
// in flight (the install takes one off for each reservation handed back
// meanwhile: taken must not go below zero, nor free units appear that are
// not there). The sum is sold plus everything in flight, even past the
// stock (the database refuses the excess).
func plannedTaken(stock, sold int64, inFlight []int64) []int64 {
	k := len(inFlight)
	total := sold
	for _, n := range inFlight {
		total += n
	}
	// free[b] may go up to caps[b]; a bucket holding more in flight than
	// its share of the stock starts below zero, and the others make up.
	free, caps := make([]int64, k), make([]int64, k)
	left := stock - total
	for b, n := range inFlight {
		room := share(stock, k, b) - n
		caps[b] = room
		if room < 0 {
			free[b] = room
			left -= room
		}
	}
	if left < 0 {
		free[0] += left // past the stock: counted all the same
		left = 0
	}
	for left > 0 {
		open := int64(0)
		for b := range caps {
			if free[b] < caps[b] {
				open++
			}
		}
		if open == 0 {
			break // cannot happen: the caps leave room for the stock not in flight
		}
		each := max(1, left/open)
		for b := range caps {
			if add := min(each, caps[b]-free[b], left); add > 0 {
				free[b] += add
				left -= add
			}
		}
	}
	taken := make([]int64, k)
	for b := range taken {
		taken[b] = share(stock, k, b) - free[b]
	}
	return taken
}

// stager writes staged keys in slices of stageSlice, stageDepth slices a
// round trip, each key with a TTL so that a rebuild that dies leaves
// nothing for long.
type stager struct {
	g       *Gate
	ctx     context.Context
	fields  map[string][]any // hash key -> pending field, value pairs
	members map[string][]any // set key -> pending members
	pending int
}

func (s *stager) hset(key, field, value string) error {
	if s.fields == nil {
		s.fields = map[string][]any{}
	}
	s.fields[key] = append(s.fields[key], field, value)
	return s.added()
}

func (s *stager) sadd(key, member string) error {
	if s.members == nil {
		s.members = map[string][]any{}
	}
	s.members[key] = append(s.members[key], member)
	return s.added()
}

func (s *stager) added() error {
	if s.pending++; s.pending < stageSlice*stageDepth {
		return nil
	}
	return s.flush()
}

// flush writes everything pending in one pipeline.
func (s *stager) flush() error {
	ctx := s.ctx
	_, err := s.g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for key, f := range s.fields {
			for i := 0; i < len(f); i += 2 * stageSlice {
				p.HSet(ctx, key, f[i:min(i+2*stageSlice, len(f))]...)
			}
			p.Expire(ctx, key, stageTTL)
		}
		for key, m := range s.members {
			for i := 0; i < len(m); i += stageSlice {
				p.SAdd(ctx, key, m[i:min(i+stageSlice, len(m))]...)
			}
			p.Expire(ctx, key, stageTTL)
		}
		return nil
	})
	clear(s.fields)
	clear(s.members)
	s.pending = 0
	if err != nil {
		return Error("rebuild: stage", err)
	}
	return nil
}
