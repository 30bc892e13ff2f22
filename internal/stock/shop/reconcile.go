package shop

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// reconcileAttempts bounds how often a repair is recomputed when orders
// change the gate meanwhile.
const reconcileAttempts = 5

// Reconcile compares an item's Redis state with the database and, with
// repair, makes Redis agree where that is safe: a missing gate is rebuilt;
// otherwise the gate is rewritten only if nothing changed it between the
// snapshot the repair was computed from and the repair itself (a script
// checks), and never while the database itself is inconsistent.
func (s *Service) Reconcile(ctx context.Context, id int64, repair bool) (*stock.Reconciliation, error) {
	// The report describes the state as first found, and what was done.
	var found *stock.Reconciliation
	handedBack := 0
	done := func(note string) (*stock.Reconciliation, error) {
		found.Repaired, found.Note = true, note
		if handedBack > 0 {
			found.Note = fmt.Sprintf("%d orphaned reservations handed back; %s", handedBack, note)
		}
		return found, nil
	}
	for attempt := 1; ; attempt++ {
		r, plan, err := s.reconcileOnce(ctx, id)
		if err != nil {
			return nil, err
		}
		if found == nil {
			found = r
		}
		switch {
		case !repair || len(found.Drift) == 0:
			return found, nil
		case len(r.Drift) == 0: // orphans handed back: nothing else to do
			return done("the gate agrees with the database")
		case !s.strategy(r.Strategy).Gated():
			found.Note = fmt.Sprintf("the %s strategy keeps no stock in Redis; nothing to repair there", r.Strategy)
			return found, nil
		case r.Orders != r.Sold:
			found.Note = "not repaired: the database itself is inconsistent (sold differs from the live orders); Redis is rebuilt from the database, so fix that first"
			return found, nil
		case !r.GatePresent:
			if err := s.strategy(r.Strategy).BuildGate(ctx, id); err != nil {
				return nil, err
			}
			return done("gate rebuilt from the database")
		case len(plan.orphans) > 0:
			// Hand orphaned reservations back (exact, idempotent), then
			// look again.
			it, err := s.routing(ctx, id)
			if err != nil {
				return nil, err
			}
			for user, oid := range plan.orphans {
				if _, err := s.gate.HandBack(ctx, gate.HomeBucket(id, it.Buckets, user), user, oid, ""); err != nil {
					return nil, err
				}
			}
			s.cfg.Logger.WarnContext(ctx, "reconcile: orphaned reservations handed back", "item", id, "count", len(plan.orphans))
			handedBack += len(plan.orphans)
			s.restocked(ctx, id)
			continue
		}
		ok, err := s.applyRepair(ctx, r, plan)
		if err != nil {
			return nil, err
		}
		if ok {
			s.restocked(ctx, id)
			return done("gate rewritten from the database")
		}
		if attempt == reconcileAttempts {
			found.Note = fmt.Sprintf("not repaired: orders kept changing the gate during %d attempts; run it again when the item is quieter", attempt)
			if handedBack > 0 {
				found.Repaired = true
				found.Note = fmt.Sprintf("%d orphaned reservations handed back; the rest %s", handedBack, found.Note)
			}
			return found, nil
		}
	}
}

// repairPlan is what a repair would write, computed from one snapshot.
type repairPlan struct {
	takenRaw     string // the gate's taken field as read
	buyersLen    int64
	queuedLen    int64
	setBuyers    map[string]string // user -> order id to set
	removeBuyers map[string]string // user -> order id to remove if unchanged
	orphans      map[string]string // lua: user -> order id to hand back
	released     []string          // cancelled order ids: their units are back
	buckets      gate.BucketsView  // an item with several buckets, as read
}

func (s *Service) reconcileOnce(ctx context.Context, id int64) (*stock.Reconciliation, repairPlan, error) {
	plan := repairPlan{setBuyers: map[string]string{}, removeBuyers: map[string]string{}, orphans: map[string]string{}}
	it, err := s.store.Item(ctx, id)
	if err != nil {
		return nil, plan, err
	}
	strat := s.strategy(it.Strategy)
	r := &stock.Reconciliation{ItemID: id, Strategy: it.Strategy, Gated: strat.Gated()}
	if !strat.Gated() {
		snap, err := s.store.BuyersSnapshot(ctx, id)
		if err != nil {
			return nil, plan, err
		}
		fillDB(r, snap)
		checkDB(r)
		if err := s.checkBucketRows(ctx, it, r); err != nil {
			return nil, plan, err
		}
		return r, plan, nil
	}

	// Redis first, in one MULTI, then the database: an order that moves
	// from one to the other meanwhile is seen at least once, counted once.
	// (An item with several buckets is read bucket by bucket; see
	// bucketsSeen.)
	var seen redisSeen
	var m map[string]string
	if it.Buckets > 1 {
		m, err = s.bucketsSeen(ctx, it, &seen, &plan)
	} else {
		m, err = s.gateSeen(ctx, id, &seen)
	}
	if err != nil {
		return nil, plan, err
	}
	snap, err := s.store.BuyersSnapshot(ctx, id)
	if err != nil {
		return nil, plan, err
	}
	fillDB(r, snap)
	checkDB(r)
	if err := s.checkBucketRows(ctx, it, r); err != nil {
		return nil, plan, err
	}
	plan.released = snap.Cancelled

	r.GatePresent = len(m) > 0
	r.Buyers = int64(len(seen.buyers))
	r.Queued, r.DeadLetters = seen.queued, seen.dead
	plan.takenRaw, plan.buyersLen, plan.queuedLen = m["taken"], r.Buyers, r.Queued
	if !r.GatePresent {
		r.Drift = append(r.Drift, "the gate is missing in Redis (lost data?); the next order rebuilds it")
		return r, plan, nil
	}
	r.GateStock, _ = strconv.ParseInt(m["stock"], 10, 64)
	r.GateTaken, _ = strconv.ParseInt(m["taken"], 10, 64)
	r.SoldOutMark = m["soldout"] != "" && m["soldout"] == m["stock"]

	// What the buyers hash should hold: every order's user, plus the
	// orders in flight.
	want := make(map[string]string, len(snap.Users))
	for u, o := range snap.Users {
		want[u] = o
	}
	inFlight := strat.inFlight(id, seen, snap, want, r, &plan)
	r.ExpectedTaken = r.Sold + inFlight + r.Orphaned

	if r.GateStock != r.Stock {
		r.Drift = append(r.Drift, fmt.Sprintf("gate stock %d, database stock %d", r.GateStock, r.Stock))
	}
	if r.GateTaken != r.ExpectedTaken {
		r.Drift = append(r.Drift, fmt.Sprintf("gate has taken %d units, expected %d (sold %d + %d in flight + %d orphaned)",
			r.GateTaken, r.ExpectedTaken, r.Sold, inFlight, r.Orphaned))
	}
	if r.Orphaned > 0 {
		r.Drift = append(r.Drift, fmt.Sprintf("%d reservations over %s old have no order: their writer died; they hold units until handed back", r.Orphaned, s.lua.orphanAfter))
	}
	if r.SoldOutMark && r.ExpectedTaken < r.Stock {
		r.Drift = append(r.Drift, fmt.Sprintf("the gate is marked sold out, but %d units are left", r.Stock-r.ExpectedTaken))
	}
	have := seen.buyers
	for u, o := range want {
		if have[u] != o {
			plan.setBuyers[u] = o
		}
	}
	for u, o := range have {
		if _, ok := want[u]; !ok && plan.orphans[u] == "" {
			plan.removeBuyers[u] = o
		}
	}
	if n := len(plan.setBuyers); n > 0 {
		r.Drift = append(r.Drift, fmt.Sprintf("%d buyers missing or wrong in Redis (e.g. %s)", n, example(plan.setBuyers)))
	}
	if n := len(plan.removeBuyers); n > 0 {
		r.Drift = append(r.Drift, fmt.Sprintf("%d buyers in Redis with no order in the database or the queue (e.g. %s)", n, example(plan.removeBuyers)))
	}
	if r.FailedOrders > 0 {
		r.Drift = append(r.Drift, fmt.Sprintf("%d admitted orders were refused by the database and recorded as failed (Redis lost data)", r.FailedOrders))
	}
	return r, plan, nil
}

// gateSeen reads an item's one gate, its buyers and its queue in one
// MULTI.
func (s *Service) gateSeen(ctx context.Context, id int64, seen *redisSeen) (map[string]string, error) {
	var meta, buyers *redis.MapStringStringCmd
	var queued, dead *redis.XMessageSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, s.keys.Meta(id))
		buyers = p.HGetAll(ctx, s.keys.Buyers(id))
		queued = p.XRange(ctx, s.keys.Stream(id), "-", "+")
		dead = p.XRange(ctx, s.keys.Dead(id), "-", "+")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, gate.Error("read gate", err)
	}
	seen.buyers = buyers.Val()
	seen.entries = append(queued.Val(), dead.Val()...)
	seen.queued, seen.dead = int64(len(queued.Val())), int64(len(dead.Val()))
	return meta.Val(), nil
}

// bucketsSeen reads every bucket of an item with several buckets and
// sums them into the fields of one gate: stock (with units in moves under
// way), taken, a sold-out mark when marks leave no unit free. The buckets
// cannot be read in one MULTI (different slots); a reconcile of such an
// item under load can report drift that is only orders moving, and its
// repair (a rebuild of every bucket) is for a quiet item.
func (s *Service) bucketsSeen(ctx context.Context, it *stock.Item, seen *redisSeen, plan *repairPlan) (map[string]string, error) {
	v, err := s.gate.ReadBuckets(ctx, it.ID, it.Buckets, true)
	if err != nil {
		return nil, err
	}
	seen.buyers = v.Buyers
	plan.buckets = v
	if it.Strategy.Queued() {
		// Each bucket's queue: its stream and dead letters.
		for _, bk := range gate.AllBuckets(it.ID, it.Buckets) {
			keys := s.keys.Bucket(bk)
			var queued, dead *redis.XMessageSliceCmd
			_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				queued = p.XRange(ctx, keys.Stream, "-", "+")
				dead = p.XRange(ctx, keys.Dead, "-", "+")
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, gate.Error("read queue", err)
			}
			seen.entries = append(seen.entries, queued.Val()...)
			seen.entries = append(seen.entries, dead.Val()...)
			seen.queued += int64(len(queued.Val()))
			seen.dead += int64(len(dead.Val()))
		}
	}
	if !v.Present {
		return nil, nil
	}
	m := map[string]string{"stock": strconv.FormatInt(v.Stock, 10), "taken": strconv.FormatInt(v.Taken, 10)}
	if v.Free == 0 && v.Taken < v.Stock {
		m["soldout"] = m["stock"]
	}
	return m, nil
}

func fillDB(r *stock.Reconciliation, snap store.Buyers) {
	r.Stock, r.Sold, r.Orders, r.FailedOrders = snap.Item.Stock, snap.Item.Sold, snap.Live, snap.Failed
}

// checkDB reports a database that disagrees with itself.
func checkDB(r *stock.Reconciliation) {
	if r.Orders != r.Sold {
		r.Drift = append(r.Drift, fmt.Sprintf("database: sold is %d but %d orders are live", r.Sold, r.Orders))
	}
}

// checkBucketRows reports, for an item with several buckets, each bucket
// row whose sold differs from the live orders of the buyers whose home
// bucket it is, and rows whose stock does not add up to the item's. It is
// the database's own drift (a bug, or a hand edit): a repair rewrites the
// gate, never the rows.
func (s *Service) checkBucketRows(ctx context.Context, it *stock.Item, r *stock.Reconciliation) error {
	rows, err := s.store.BucketRows(ctx, it.ID, it.Buckets)
	if err != nil {
		return err
	}
	var units int64
	for _, row := range rows {
		units += row.Stock
		if row.Sold != row.Live {
			r.Drift = append(r.Drift, fmt.Sprintf("database: bucket row %d has sold %d but %d live orders are its buyers'", row.Bucket, row.Sold, row.Live))
		}
	}
	if rows != nil && units != r.Stock {
		r.Drift = append(r.Drift, fmt.Sprintf("database: the bucket rows hold %d units, the item's stock is %d", units, r.Stock))
	}
	return nil
}

// applyRepair rewrites the gate if it is as the snapshot saw it. It holds
// the item's row lock and writes the stock read under it, not the
// snapshot's: a stock change writes the gate under that lock too (see
// SetStock), so a repair never puts back a stock changed meanwhile.
func (s *Service) applyRepair(ctx context.Context, r *stock.Reconciliation, plan repairPlan) (repaired bool, err error) {
	err = s.store.WithItemLocked(ctx, r.ItemID, func(ctx context.Context, locked *store.LockedItem) error {
		units, err := locked.Stock(ctx)
		if err != nil {
			return err
		}
		if plan.buckets.PerBucket != nil && r.Strategy.Queued() {
			// Exact under the locks whatever moved since the report: no
			// batch commits, and the metas go before the streams are read.
			err := s.queue.RebuildLocked(ctx, locked)
			repaired = err == nil
			return err
		}
		if plan.buckets.PerBucket != nil {
			repaired, err = s.lua.rebuildLocked(ctx, locked, &plan.buckets)
			return err
		}
		repaired, err = s.runRepair(ctx, r, plan, units)
		return err
	})
	return repaired, err
}

func (s *Service) runRepair(ctx context.Context, r *stock.Reconciliation, plan repairPlan, units int64) (bool, error) {
	done, err := s.gate.Repair(ctx, r.ItemID, gate.Repair{TakenSeen: plan.takenRaw, BuyersSeen: plan.buyersLen,
		QueuedSeen: plan.queuedLen, Stock: units, Taken: r.ExpectedTaken - r.Orphaned,
		SetBuyers: plan.setBuyers, RemoveBuyers: plan.removeBuyers, Released: plan.released})
	if err != nil {
		return false, err
	}
	if done {
		s.cfg.Logger.WarnContext(ctx, "reconcile: gate repaired from the database", "item", r.ItemID, "drift", r.Drift)
	}
	return done, nil
}

// reservationAge is how old a reservation's UUIDv7 order id is.
func reservationAge(orderID string) time.Duration {
	id, err := uuid.Parse(orderID)
	if err != nil || id.Version() != 7 {
		return 0
	}
	sec, nsec := id.Time().UnixTime()
	return time.Since(time.Unix(sec, nsec))
}

func example(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i == 3 {
			return out + ", ..."
		}
		if i > 0 {
			out += ", "
		}
		out += k
	}
	return out
}

// ItemIDs lists every item, for reconciling them all.
func (s *Service) ItemIDs(ctx context.Context) ([]int64, error) { return s.store.ItemIDs(ctx) }
