// Package gate is the Redis gate in front of the database: per item, the
// stock, what is taken, the sale window and the buyers, checked and changed
// by Lua scripts so that a stampede is refused in Redis. It guards no
// promise alone (the database has the last word on oversell and on one
// order per user); it keeps the database from the stampede, and its hand-
// back and release are exact, so no unit is lost in it.
//
// It also holds the round-trip sharing Pipeline, the sold-out Memo kept in
// step across instances by Events, and the Keys of everything in Redis.
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
)

// Gate runs the gate's scripts for every item.
type Gate struct {
	rdb  redis.UniversalClient
	keys Keys
	pipe *Pipeline
	log  *slog.Logger
}

// New returns a Gate on rdb that sends its hot-path calls through pipe.
func New(rdb redis.UniversalClient, keys Keys, pipe *Pipeline, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{rdb: rdb, keys: keys, pipe: pipe, log: log}
}

// Keys names the keys the gate uses.
func (g *Gate) Keys() Keys { return g.keys }

// Exists reports whether item id's gate is in Redis.
func (g *Gate) Exists(ctx context.Context, id int64) (bool, error) {
	n, err := g.rdb.Exists(ctx, g.keys.Meta(id)).Result()
	if err != nil {
		return false, Error("check gate", err)
	}
	return n == 1, nil
}

// Reserve takes one unit of the item for userID under orderID, if the sale
// is open, the user holds none and a unit is left, and returns the stock
// the gate saw (for HandBack's soldOutAt). Refusals: stock.ErrSoldOut,
// stock.ErrSaleNotStarted, stock.ErrSaleEnded, *DupError (the order the
// user holds), ErrMissing. If ctx ends while the script is in flight, the
// script may still reserve; abandoned then runs once it has answered.
//
// It runs in bk, the user's home bucket (Single for an item of one
// bucket); a bucket that is empty answers stock.ErrSoldOut although others
// may have units: see Rebalance.
func (g *Gate) Reserve(ctx context.Context, bk Bucket, userID, orderID string, now time.Time, abandoned func()) (stockSeen string, err error) {
	itemID := bk.Item
	keys := g.keys.Bucket(bk)
	res, err := g.pipe.RunScript(ctx, reserveScript, abandoned,
		[]string{keys.Meta, keys.Buyers, keys.void(orderID)},
		userID, orderID, now.UnixMilli()).StringSlice()
	if err != nil {
		return "", Error("reserve", err)
	}
	if len(res) != 3 {
		return "", fmt.Errorf("redis: reserve: unexpected reply %q", res)
	}
	switch res[0] {
	case "ok":
		return res[2], nil
	case "dup":
		return "", &DupError{OrderID: res[1]}
	case "void":
		// Handed back already: its caller gave up (a rerun reached Redis
		// after the hand-back).
		return "", fmt.Errorf("redis: reserve: attempt %s was given up: %w", orderID, stock.ErrUnavailable)
	}
	return "", statusError("reserve", itemID, res[0])
}

// statusError is the error of a script's common refusals.
func statusError(op string, itemID int64, status string) error {
	switch status {
	case "sold_out":
		return stock.ErrSoldOut
	case "not_started":
		return stock.ErrSaleNotStarted
	case "ended":
		return stock.ErrSaleEnded
	case "missing":
		return fmt.Errorf("item %d: %w", itemID, ErrMissing)
	}
	return fmt.Errorf("redis: %s: unexpected status %q", op, status)
}

// voidTTL is how long a handed-back attempt stays void: far longer than a
// reserve command can wander in a stalled connection.
const voidTTL = 10 * time.Minute

// HandBack returns the unit orderID reserved for userID, once, and reports
// whether it went back. soldOutAt, when not "", is the stock the reserve
// saw: the database said sold out at it, and the gate is marked so.
// It runs in bk, the bucket the unit was reserved in (the user's home).
//
// Once means once with Release too: a write that committed although its
// caller heard an error may be handed back and, its order cancelled, be
// released as well, in either order. Both record the order in the released
// set of its release bucket (ReleaseBucket). When that is bk, one script
// does it all; otherwise (an item with several buckets) the buckets are in
// different slots and it takes three: check in bk that the attempt owns the
// buyer entry, release the unit in the release bucket, then drop the entry
// in bk. A hand-back cut short leaves the entry, and the next one (a retry,
// the orphan hand-back, a reconcile) finishes it, the released set saying
// whether the unit is back already.
//
// Across a rebuild of the item: the release counts only in the build the
// check in bk saw (a rebuild since then counted the unit free, seeing the
// void marker the check set: 'stale'); and a check in bk once bk is
// installed, whose release bucket is not yet, finds it missing and leaves
// the release to the rebuild, which finishes it (finishHandBacks).
func (g *Gate) HandBack(ctx context.Context, bk Bucket, userID, orderID, soldOutAt string) (bool, error) {
	bkeys := g.keys.Bucket(bk)
	rel := ReleaseBucket(bk.Item, bk.K, orderID)
	if rel == bk {
		keys := []string{bkeys.Meta, bkeys.Buyers, bkeys.Released, bkeys.void(orderID)}
		status, err := runStatus(ctx, g.rdb, handBackScript, "hand back", keys, userID, orderID, soldOutAt, int64(voidTTL/time.Second))
		return status == "back", err
	}
	keys := []string{bkeys.Meta, bkeys.Buyers, bkeys.void(orderID)}
	res, err := handBackHomeScript.Run(ctx, g.rdb, keys, userID, orderID, soldOutAt, int64(voidTTL/time.Second)).Slice()
	if err != nil {
		return false, Error("hand back", err)
	}
	status, data, err := Reply(res)
	if err != nil || status != "owned" {
		return false, err
	}
	built := ""
	if len(data) > 0 {
		built, _ = data[0].(string)
	}
	rkeys := g.keys.Bucket(rel)
	status, err = runStatus(ctx, g.rdb, releaseScript, "hand back: release", []string{rkeys.Meta, rkeys.Released}, orderID, built)
	switch {
	case err != nil:
		return false, err
	case status == "stale":
		// Rebuilt since the check: the rebuild settled the entry too.
		return false, nil
	case status != "released" && status != "already" && status != "missing":
		return false, statusError("hand back: release", bk.Item, status)
	}
	// 'missing': the release bucket is lost, or cleared by a rebuild under
	// way, and the item is rebuilt whole. If the check above came before
	// that rebuild's install of bk, the install finds the void marker (or
	// no entry) and counts the unit free; if after, the install kept the
	// reservation, and the rebuild releases its unit once every bucket is
	// installed (finishHandBacks).
	if _, err := runStatus(ctx, g.rdb, dropBuyerScript, "hand back: drop buyer", []string{bkeys.Buyers}, userID, orderID); err != nil {
		return false, err
	}
	return status == "released", nil
}

// SetStockResult is what SetStock did.
type SetStockResult int

// What SetStock did.
const (
	StockSet     SetStockResult = iota // the gate has the new stock
	StockMissing                       // no gate: the next order builds it
	StockRefused                       // strict, and below what is taken
)

// SetStock sets the stock in an item's gate; an absent gate stays absent.
// strict refuses a stock below what the gate has taken.
func (g *Gate) SetStock(ctx context.Context, id, units int64, strict bool) (SetStockResult, error) {
	flag := "0"
	if strict {
		flag = "1"
	}
	status, err := runStatus(ctx, g.rdb, setStockScript, "set stock", []string{g.keys.Meta(id)}, units, flag)
	switch {
	case err != nil:
		return StockSet, err
	case status == "refused":
		return StockRefused, nil
	case status == "missing":
		return StockMissing, nil
	case status != "set":
		return StockSet, fmt.Errorf("redis: set stock: unexpected status %q", status)
	}
	return StockSet, nil
}

// Release returns a cancelled order's unit to the item's gate, once per
// order however often it runs; it reports whether this call took it back.
// ErrMissing: build the gate (which counts the order if it was cancelled
// before the build's snapshot) and release again.
// The unit goes to ReleaseBucket(item, buckets, orderID).
func (g *Gate) Release(ctx context.Context, itemID int64, buckets int, orderID string) (bool, error) {
	keys := g.keys.Bucket(ReleaseBucket(itemID, buckets, orderID))
	res, err := runStatus(ctx, g.rdb, releaseScript, "release", []string{keys.Meta, keys.Released}, orderID, "")
	if err != nil {
		return false, err
	}
	switch res {
	case "released":
		return true, nil
	case "already":
		return false, nil
	}
	return false, statusError("release", itemID, res)
}

// Repair is a rewrite of an item's gate computed from one snapshot of
// Redis and the database; it applies only if the gate is still as seen.
type Repair struct {
	// As seen: the gate's taken field, the buyers' and queue's lengths.
	TakenSeen  string
	BuyersSeen int64
	QueuedSeen int64
	// To write.
	Stock, Taken int64
	SetBuyers    map[string]string // user -> order id to set
	RemoveBuyers map[string]string // user -> order id to remove if unchanged
	Released     []string          // cancelled order ids: their units are back
}

// Repair applies r to the item's gate if nothing changed it since the
// snapshot, and reports whether it did.
func (g *Gate) Repair(ctx context.Context, itemID int64, r Repair) (bool, error) {
	args := []any{r.TakenSeen, r.BuyersSeen, r.QueuedSeen, r.Stock, r.Taken, len(r.SetBuyers), len(r.RemoveBuyers)}
	for u, o := range r.SetBuyers {
		args = append(args, u, o)
	}
	for u, o := range r.RemoveBuyers {
		args = append(args, u, o)
	}
	for _, oid := range r.Released {
		args = append(args, oid)
	}
	status, err := runStatus(ctx, g.rdb, repairScript, "repair gate", []string{g.keys.Meta(itemID), g.keys.Buyers(itemID),
		g.keys.Stream(itemID), g.keys.Released(itemID)}, args...)
	return status == "repaired", err
}

func unixMilli(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Remaining is what the item's gate has left to sell (stock - taken, at
// least 0); ok is false when the item has no gate in Redis.
func (g *Gate) Remaining(ctx context.Context, id int64) (left int64, ok bool, err error) {
	vals, err := g.rdb.HMGet(ctx, g.keys.Meta(id), "stock", "taken").Result()
	if err != nil {
		return 0, false, Error("read gate", err)
	}
	st, ok1 := vals[0].(string)
	tk, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		return 0, false, nil
	}
	s, err1 := strconv.ParseInt(st, 10, 64)
	t, err2 := strconv.ParseInt(tk, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false, fmt.Errorf("gate of item %d: stock %q, taken %q: not integers", id, st, tk)
	}
	return max(0, s-t), true, nil
}
