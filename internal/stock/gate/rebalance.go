package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The gate of an item with several buckets. A buyer reserves in the home
// bucket only; when it is empty, Rebalance moves units there from the
// bucket with the most free units (half of them, so the tail of a sale
// rebalances in a few moves), or finds the whole item sold out.
//
// "Sold out" must never be said while units remain in another bucket
// (a phantom sold-out). The buckets are in different slots, so no command
// reads them all at once; Rebalance reads them twice (a double collect):
// free units only ever appear in a bucket by a step that also increments
// its meta's moves field (a move in, a release, a hand-back, a stock
// raise, a rebuild, which also changes built), and a move takes units
// out only into a record in the same slot, read with the meta. If the
// first read finds every bucket empty with no move under way, and the
// second finds every moves and built field unchanged, then at the instant
// between the two reads no bucket had a free unit and none was in transit.

// bucketState is one bucket as a collect read it.
type bucketState struct {
	exists             bool
	stock, taken       int64
	soldOut            bool     // marked sold out by the database at this stock
	version            string   // moves and built: changes whenever units come in
	out                []string // pending moves: "id to units unix-ms [built]"
	stockRaw, takenRaw string
	movesRaw, builtRaw string
}

func (s bucketState) free() int64 {
	if !s.exists || s.soldOut {
		return 0
	}
	return max(0, s.stock-s.taken)
}

// collect reads every bucket of an item, in one pipeline.
func (g *Gate) collect(ctx context.Context, itemID int64, k int) ([]bucketState, error) {
	bks := AllBuckets(itemID, k)
	metas := make([]*redis.SliceCmd, len(bks))
	outs := make([]*redis.MapStringStringCmd, len(bks))
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range bks {
			keys := g.keys.Bucket(bk)
			metas[i] = p.HMGet(ctx, keys.Meta, "stock", "taken", "soldout", "moves", "built")
			outs[i] = p.HGetAll(ctx, keys.Out)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, Error("read buckets", err)
	}
	states := make([]bucketState, len(bks))
	for i := range bks {
		v := metas[i].Val()
		str := func(j int) string {
			if j < len(v) {
				if s, ok := v[j].(string); ok {
					return s
				}
			}
			return ""
		}
		st := bucketState{stockRaw: str(0), takenRaw: str(1), movesRaw: str(3), builtRaw: str(4)}
		st.exists = st.stockRaw != ""
		st.stock, _ = strconv.ParseInt(st.stockRaw, 10, 64)
		st.taken, _ = strconv.ParseInt(st.takenRaw, 10, 64)
		st.soldOut = st.exists && str(2) == st.stockRaw
		st.version = st.movesRaw + "/" + st.builtRaw
		for id, rec := range outs[i].Val() {
			st.out = append(st.out, id+" "+rec)
		}
		states[i] = st
	}
	return states, nil
}

// rebalanceRounds bounds the collects of one Rebalance.
const rebalanceRounds = 4

// Rebalance is called when the bucket home of an item with k buckets
// refused a buyer as sold out. It finishes any move under way, or moves
// half the free units of the fullest bucket to home, and then the buyer
// should try home again (soldOut false); or it finds, by a double
// collect, that the whole item had no free unit at one instant (soldOut
// true). ErrMissing: a bucket is gone; rebuild the item's gate.
func (g *Gate) Rebalance(ctx context.Context, itemID int64, k, home int) (soldOut bool, err error) {
	for round := 0; round < rebalanceRounds; round++ {
		first, err := g.collect(ctx, itemID, k)
		if err != nil {
			return false, err
		}
		pending := false
		donor := -1
		for b, st := range first {
			if !st.exists {
				return false, fmt.Errorf("item %d bucket %d: %w", itemID, b, ErrMissing)
			}
			for _, rec := range st.out {
				pending = true
				if err := g.finishMove(ctx, Bucket{Item: itemID, B: b, K: k}, rec); err != nil {
					return false, err
				}
			}
			if donor < 0 || st.free() > first[donor].free() {
				donor = b
			}
		}
		switch {
		case pending, first[home].free() > 0:
			return false, nil
		case first[donor].free() > 0:
			_, err := g.move(ctx, Bucket{Item: itemID, B: donor, K: k}, Bucket{Item: itemID, B: home, K: k})
			return false, err
		}
		second, err := g.collect(ctx, itemID, k)
		if err != nil {
			return false, err
		}
		same := true
		for b := range first {
			same = same && second[b].exists && second[b].version == first[b].version
		}
		if same {
			return true, nil
		}
	}
	return false, nil
}

// move moves half of from's free units to to, both steps, and reports how
// many it moved (0: from had none).
func (g *Gate) move(ctx context.Context, from, to Bucket) (int64, error) {
	id := randomHex(8)
	keys := g.keys.Bucket(from)
	res, err := moveOutScript.Run(ctx, g.rdb, []string{keys.Meta, keys.Out}, id, to.B, time.Now().UnixMilli()).StringSlice()
	if err != nil {
		return 0, Error("move units out", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("redis: move out: unexpected reply %q", res)
	}
	switch res[0] {
	case "empty":
		return 0, nil
	case "missing":
		return 0, fmt.Errorf("item %d bucket %d: %w", from.Item, from.B, ErrMissing)
	case "ok":
	default:
		return 0, fmt.Errorf("redis: move out: unexpected status %q", res[0])
	}
	if err := g.finishMove(ctx, from, id+" "+res[1]); err != nil {
		return 0, err
	}
	_, units, _, _ := parseMove(id + " " + res[1])
	return units, nil
}

// StartMove runs a move's first step alone, stamped at, as a process
// killed between the two steps leaves it: for fault tests.
func (g *Gate) StartMove(ctx context.Context, from Bucket, to int, at time.Time) error {
	keys := g.keys.Bucket(from)
	return moveOutScript.Run(ctx, g.rdb, []string{keys.Meta, keys.Out}, randomHex(8), to, at.UnixMilli()).Err()
}

// parseMove reads a pending move "id to units unix-ms [built]".
func parseMove(rec string) (id string, units int64, to int, at time.Time) {
	f := strings.Fields(rec)
	if len(f) != 4 && len(f) != 5 {
		return "", 0, -1, time.Time{}
	}
	t, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, -1, time.Time{}
	}
	return f[0], n, t, time.UnixMilli(ms)
}

// finishMove applies a pending move of from's to its receiver (once, by
// the move's id, and only in the gate build it began in) and then deletes
// its record.
func (g *Gate) finishMove(ctx context.Context, from Bucket, rec string) error {
	id, units, to, _ := parseMove(rec)
	if to < 0 || to >= from.K {
		return fmt.Errorf("redis: item %d bucket %d: malformed move record %q", from.Item, from.B, rec)
	}
	built := ""
	if f := strings.Fields(rec); len(f) == 5 {
		built = f[4]
	}
	into := g.keys.Bucket(Bucket{Item: from.Item, B: to, K: from.K})
	status, err := runStatus(ctx, g.rdb, moveInScript, "move units in", []string{into.Meta, into.In}, id, units, built)
	if err != nil {
		return err
	}
	switch status {
	case "missing":
		return fmt.Errorf("item %d bucket %d: %w", from.Item, to, ErrMissing)
	case "stale":
		g.log.WarnContext(ctx, "a move begun before the item's gate was rebuilt was dropped (the rebuild counted its units)",
			"item", from.Item, "from", from.B, "to", to, "units", units)
	}
	if err := g.rdb.HDel(ctx, g.keys.Bucket(from).Out, id).Err(); err != nil {
		return Error("finish move", err)
	}
	return nil
}

// FinishMoves finishes the moves of an item with k buckets that were
// started before before and never finished (their process died between
// the two steps), and returns how many it finished.
func (g *Gate) FinishMoves(ctx context.Context, itemID int64, k int, before time.Time) (int, error) {
	states, err := g.collect(ctx, itemID, k)
	if err != nil {
		return 0, err
	}
	n := 0
	for b, st := range states {
		for _, rec := range st.out {
			if _, _, _, at := parseMove(rec); !at.Before(before) {
				continue
			}
			if err := g.finishMove(ctx, Bucket{Item: itemID, B: b, K: k}, rec); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// BucketsView is what an item's buckets hold, summed.
type BucketsView struct {
	Present   bool  // every bucket's gate is in Redis
	Stock     int64 // the buckets' stock plus units in moves under way
	Taken     int64
	Free      int64             // units a buyer can still get
	Moving    int64             // units in moves under way
	SoldOut   bool              // every bucket empty or marked sold out
	Buyers    map[string]string // user -> order id, of every bucket
	PerBucket []int64           // free units per bucket
}

// ReadBuckets reads an item's k buckets (not atomically: the buckets are
// in different slots) with their buyers when withBuyers.
func (g *Gate) ReadBuckets(ctx context.Context, itemID int64, k int, withBuyers bool) (BucketsView, error) {
	states, err := g.collect(ctx, itemID, k)
	if err != nil {
		return BucketsView{}, err
	}
	v := BucketsView{Present: true, SoldOut: true, PerBucket: make([]int64, len(states))}
	for b, st := range states {
		v.Present = v.Present && st.exists
		v.Stock += st.stock
		v.Taken += st.taken
		v.PerBucket[b] = st.free()
		v.Free += st.free()
		for _, rec := range st.out {
			_, units, _, _ := parseMove(rec)
			v.Moving += units
		}
	}
	v.Stock += v.Moving
	v.Free += v.Moving
	v.SoldOut = v.Free == 0
	if withBuyers {
		v.Buyers = map[string]string{}
		for _, bk := range AllBuckets(itemID, k) {
			m, err := g.rdb.HGetAll(ctx, g.keys.Bucket(bk).Buyers).Result()
			if err != nil {
				return v, Error("read buyers", err)
			}
			for u, o := range m {
				v.Buyers[u] = o
			}
		}
	}
	return v, nil
}

// ExistsAll reports whether every one of an item's k buckets is in Redis.
func (g *Gate) ExistsAll(ctx context.Context, itemID int64, k int) (bool, error) {
	if k <= 1 {
		return g.Exists(ctx, itemID)
	}
	bks := AllBuckets(itemID, k)
	cmds := make([]*redis.IntCmd, len(bks))
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range bks {
			cmds[i] = p.Exists(ctx, g.keys.Bucket(bk).Meta)
		}
		return nil
	})
	if err != nil {
		return false, Error("check buckets", err)
	}
	for _, c := range cmds {
		if c.Val() != 1 {
			return false, nil
		}
	}
	return true, nil
}

// share is bucket b's part of n units over k buckets: n/k, and one more
// for each of the first n%k buckets. For m <= n, share(m) <= share(n).
func share(n int64, k, b int) int64 {
	s := n / int64(k)
	if int64(b) < n%int64(k) {
		s++
	}
	return s
}

// opTTL is how long a stock change remembers what it did in a bucket: far
// longer than a retried command can wander.
const opTTL = 10 * time.Minute

// AdjustStock changes the stock of an item with k buckets by delta units:
// a raise is spread evenly; a cut takes free units only, fullest buckets
// first. It returns the units it changed (a cut may get fewer than asked:
// the caller puts them back with RestoreStock and refuses). The caller
// holds the item's row lock in the database.
func (g *Gate) AdjustStock(ctx context.Context, itemID int64, k int, delta int64) (changed []int64, err error) {
	changed = make([]int64, k)
	if delta >= 0 {
		for b := 0; b < k; b++ {
			if err := g.adjust(ctx, Bucket{Item: itemID, B: b, K: k}, share(delta, k, b), changed); err != nil {
				return changed, err
			}
		}
		return changed, nil
	}
	v, err := g.ReadBuckets(ctx, itemID, k, false)
	if err != nil {
		return changed, err
	}
	if !v.Present {
		return changed, fmt.Errorf("item %d: %w", itemID, ErrMissing)
	}
	order := make([]int, k)
	for b := range order {
		order[b] = b
	}
	// Fullest first: the fewest scripts.
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if v.PerBucket[order[j]] > v.PerBucket[order[i]] {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	left := -delta
	for _, b := range order {
		if left == 0 {
			break
		}
		if err := g.adjust(ctx, Bucket{Item: itemID, B: b, K: k}, -left, changed); err != nil {
			return changed, err
		}
		left += changed[b]
	}
	return changed, nil
}

// RestoreStock undoes what AdjustStock changed, zeroing each entry of
// changed it has undone: after an error, changed holds what is left to
// undo.
func (g *Gate) RestoreStock(ctx context.Context, itemID int64, changed []int64) error {
	k := len(changed)
	undo := make([]int64, k)
	for b, c := range changed {
		if c != 0 {
			if err := g.adjust(ctx, Bucket{Item: itemID, B: b, K: k}, -c, undo); err != nil {
				return err
			}
			changed[b] = 0
		}
	}
	return nil
}

func (g *Gate) adjust(ctx context.Context, bk Bucket, delta int64, changed []int64) error {
	keys := g.keys.Bucket(bk)
	res, err := adjustScript.Run(ctx, g.rdb, []string{keys.Meta, keys.base + ":op:" + randomHex(8)}, delta, int64(opTTL/time.Second)).StringSlice()
	if err != nil {
		return Error("change bucket stock", err)
	}
	switch {
	case len(res) == 1 && res[0] == "missing":
		return fmt.Errorf("item %d bucket %d: %w", bk.Item, bk.B, ErrMissing)
	case len(res) != 2 || res[0] != "ok":
		return fmt.Errorf("redis: change bucket stock: unexpected reply %q", res)
	}
	n, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return fmt.Errorf("redis: change bucket stock: unexpected reply %q", res)
	}
	changed[bk.B] += n
	return nil
}
