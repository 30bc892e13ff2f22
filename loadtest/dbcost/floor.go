package main

// The floor: each strategy's order writes at a given concurrency, with no
// HTTP and no Redis in front of them, through the service's own code: the
// lua and lock strategies' group commit (shop.BareWriter: the same writer,
// batches, transactions and, for lock, fences) and the lua-async writers'
// batch transaction (store.PersistQueued, in batches of the writers' size
// from a queue kept full, as a queue in Redis is under load). What MariaDB
// alone does with them on this machine is the floor that
// loadtest/bench-ratios.sh measures each strategy's service against.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/shop"
	"github.com/seckill/seckill/internal/stock/store"
)

// floorConfig is one floor run's settings.
type floorConfig struct {
	Strategies []stock.StrategyName
	Conns      []int
	Duration   time.Duration // of each strategy at each concurrency
	Stock      int64         // each item's stock
	Writers    int           // lua-async writer goroutines
	Batch      int           // orders per lua-async transaction, at most
	Buckets    int           // the lua and lua-async items' buckets (bucket rows); 0 or 1: their items row
	Instances  int           // lua: group-commit writers of the item, as so many service instances (0: 1)
	Events     string        // on, off or both (main's -events); runFloor reads it
}

// floorResult is what one strategy at one concurrency did.
type floorResult struct {
	Strategy stock.StrategyName
	Buckets  int // the lua and lua-async items', 1 for lock
	Conns    int
	Item     int64
	Orders   int64 // committed, as counted here
	Commits  int64 // transactions that committed orders
	Elapsed  time.Duration
	// P99 is the 99th percentile of an order's wait for its commit (lua,
	// lock: what a buyer waits for in the database), or of one batch's
	// transaction (lua-async: a 202 does not wait for it).
	P99 time.Duration
	// CPU is mariadbd's CPU µs per order, -1 when it is not on this
	// machine.
	CPU     float64
	SoldOut bool // the item sold out before the time was up
	// NoEvents: the store wrote no order events (store.Options.WithoutEvents),
	// to measure what the transactional outbox costs.
	NoEvents bool
}

// floorStore is a store the floor writes through; noEvents says it writes
// no order events.
type floorStore struct {
	st       *store.Store
	noEvents bool
}

// OrdersPerSecond is the rate of committed orders.
func (r floorResult) OrdersPerSecond() float64 { return float64(r.Orders) / r.Elapsed.Seconds() }

// floor runs every strategy at every concurrency in turn, each on a new
// item of cfg.Stock units, for cfg.Duration or until the item sells out,
// whichever is first. pid is mariadbd's process (0: unknown).
//
// With several stores (with and without order events), each strategy runs
// on each store in turn, so the figures to compare come from one run.
func floor(ctx context.Context, stores []floorStore, pid int, cfg floorConfig, each func(floorResult)) error {
	for _, c := range cfg.Conns {
		for _, s := range cfg.Strategies {
			for _, fs := range stores {
				if err := floorOne(ctx, fs, pid, cfg, s, c, each); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// floorOne runs strategy s at c connections on a new item of fs's store.
func floorOne(ctx context.Context, fs floorStore, pid int, cfg floorConfig, s stock.StrategyName, c int, each func(floorResult)) error {
	st := fs.st
	k := max(1, cfg.Buckets) // every strategy's writers here have bucket rows
	it := &stock.Item{Name: fmt.Sprintf("floor-%s-c%d", s, c), Stock: cfg.Stock, Strategy: s, Buckets: k}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		return err
	}
	cpu0 := cpuOrZero(pid)
	var r floorResult
	var err error
	if s == stock.StrategyLuaAsync {
		r, err = floorQueued(ctx, st, it.ID, k, c, cfg)
	} else {
		inst := 1 // lock's instances share one Redis lock (a bucket's): one writer at a time
		if s == stock.StrategyLua {
			inst = max(1, cfg.Instances)
		}
		r, err = floorSync(ctx, st, it.ID, s == stock.StrategyLock, k, inst, c, cfg.Duration)
	}
	if err != nil {
		return fmt.Errorf("%s -c%d: %w", s, c, err)
	}
	r.Strategy, r.Buckets, r.Conns, r.Item, r.CPU, r.NoEvents = s, k, c, it.ID, -1, fs.noEvents
	if pid > 0 && r.Orders > 0 {
		r.CPU = (cpuOrZero(pid) - cpu0) / float64(r.Orders) * 1e6
	}
	each(r)
	return nil
}

func cpuOrZero(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	s, _ := cpuSeconds(pid)
	return s
}

// floorSync is conns buyers of the lua or (fenced) lock strategy, each
// placing an order, waiting for its commit and placing the next, as the
// service's connections do, until d has passed or the item sold out.
// Orders per commit: the orders of one transaction share its timestamp.
// The buyers are spread over instances writers (each its own group
// commit, as one service instance's), all on the one connection pool.
func floorSync(ctx context.Context, st *store.Store, itemID int64, fenced bool, k, instances, conns int, d time.Duration) (floorResult, error) {
	ws := make([]*shop.BareWriter, instances)
	for i := range ws {
		ws[i] = shop.NewBareWriter(st, fenced)
		defer ws[i].Close()
	}
	run, stop := context.WithTimeout(ctx, d)
	defer stop()
	waits := make([][]time.Duration, conns)
	stamps := make([][]int64, conns)
	errs := make([]error, conns)
	var soldOut atomic.Bool
	start := time.Now()
	var wg sync.WaitGroup
	for g := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; run.Err() == nil; n++ {
				o := &stock.Order{ID: uuid.Must(uuid.NewV7()).String(), ItemID: itemID, UserID: fmt.Sprintf("f%d-%d", g, n)}
				octx, cancel := context.WithTimeout(ctx, shop.DefaultRequestTimeout) // the service's request timeout
				t0 := time.Now()
				err := ws[g%instances].WriteBucketed(octx, o, "", k)
				cancel()
				switch {
				case err == nil:
					waits[g] = append(waits[g], time.Since(t0))
					stamps[g] = append(stamps[g], o.CreatedAt.UnixMicro())
				case errors.Is(err, stock.ErrSoldOut):
					soldOut.Store(true)
					stop()
					return
				default:
					errs[g] = err
					stop()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil { // interrupted: the buyers' errors say no more
		return floorResult{}, ctx.Err()
	}
	if err := errors.Join(errs...); err != nil {
		return floorResult{}, err
	}
	all := slices.Concat(waits...)
	commits := map[int64]bool{}
	for _, s := range slices.Concat(stamps...) {
		commits[s] = true
	}
	return floorResult{Orders: int64(len(all)), Commits: int64(len(commits)), Elapsed: elapsed, P99: p99(all), SoldOut: soldOut.Load()}, nil
}

// floorQueued is the lua-async writers draining one item's queue: conns
// buyers queue orders without waiting for them to be written (a 202), up
// to a few batches ahead of the writers, as the item's stream in Redis
// would hold them; cfg.Writers writers each take what is queued, up to
// cfg.Batch orders (an XREADGROUP with COUNT), and write it in one
// PersistQueued transaction, until d has passed and the queue is drained
// or the item sold out. With k > 1 buckets (planned, docs/DESIGN.md
// "Buckets for lua-async") each order is queued in its buyer's home
// bucket, as the bucket's stream would hold it, and each of the
// cfg.Writers writers writes each bucket's batch on its row at once
// (PersistQueuedBucket): cfg.Writers goroutines per bucket.
func floorQueued(ctx context.Context, st *store.Store, itemID int64, k, conns int, cfg floorConfig) (floorResult, error) {
	var epoch int64
	if err := st.WithItemLocked(ctx, itemID, func(_ context.Context, it *store.LockedItem) error {
		epoch = it.QueueEpoch
		return nil
	}); err != nil {
		return floorResult{}, err
	}
	if k > 1 {
		epoch = 0 // a new item's rows' queue epoch
	}
	run, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	queued := make([]chan *store.Queued, k)
	for b := range queued {
		queued[b] = make(chan *store.Queued, 2*cfg.Writers*cfg.Batch)
	}
	var buyers sync.WaitGroup
	for g := range conns {
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			for n := 0; ; n++ {
				q := &store.Queued{Entry: fmt.Sprintf("%d-%d", g, n), ID: uuid.Must(uuid.NewV7()).String(), ItemID: itemID,
					UserID: fmt.Sprintf("f%d-%d", g, n), Created: store.Now(), Epoch: epoch}
				select {
				case queued[stock.HomeBucketOf(q.UserID, k)] <- q:
				case <-run.Done():
					return
				}
			}
		}()
	}
	go func() {
		buyers.Wait()
		for _, ch := range queued {
			close(ch)
		}
	}()

	n := cfg.Writers * k
	took := make([][]time.Duration, n)
	errs := make([]error, n)
	var written, commits atomic.Int64
	var soldOut atomic.Bool
	start := time.Now()
	var writers sync.WaitGroup
	for i := range n {
		b := i % k
		writers.Add(1)
		go func() {
			defer writers.Done()
			for q := range queued[b] {
				batch := []*store.Queued{q}
			more:
				for len(batch) < cfg.Batch {
					select {
					case q, ok := <-queued[b]:
						if !ok {
							break more
						}
						batch = append(batch, q)
					default:
						break more
					}
				}
				t0 := time.Now()
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the writers' batchTimeout
				var res store.Persisted
				var err error
				if k > 1 {
					res, err = st.PersistQueuedBucket(tctx, itemID, b, batch, store.Now())
				} else {
					res, err = st.PersistQueued(tctx, itemID, batch, store.Now())
				}
				cancel()
				if err != nil {
					errs[i] = err
					stop()
					break
				}
				took[i] = append(took[i], time.Since(t0))
				written.Add(int64(len(res.Written)))
				if len(res.Written) > 0 {
					commits.Add(1)
				}
				if len(res.Failed) > 0 {
					soldOut.Store(true)
					stop() // sold out (no user repeats): drain what is queued
				}
			}
			for range queued[b] { // after an error: let the buyers end
			}
		}()
	}
	writers.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil { // interrupted: the buyers' errors say no more
		return floorResult{}, ctx.Err()
	}
	if err := errors.Join(errs...); err != nil {
		return floorResult{}, err
	}
	return floorResult{Orders: written.Load(), Commits: commits.Load(), Elapsed: elapsed, P99: p99(slices.Concat(took...)),
		SoldOut: soldOut.Load()}, nil
}

// p99 is the 99th percentile of ds (0 for none).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)*99+99)/100-1]
}

// printFloor prints the header of the floor's table, and returns the
// printer of its rows.
func printFloor(printf func(string, ...any)) func(floorResult) {
	printf("| strategy | conns | orders | orders/s | orders per commit | p99 | MariaDB CPU µs per order |\n|---|---|---|---|---|---|---|\n")
	return func(r floorResult) {
		cpu := "n/a"
		if r.CPU >= 0 {
			cpu = fmt.Sprintf("%.1f", r.CPU)
		}
		perCommit := "n/a"
		if r.Commits > 0 {
			perCommit = fmt.Sprintf("%.1f", float64(r.Orders)/float64(r.Commits))
		}
		label := string(r.Strategy)
		if r.Buckets > 1 {
			label += fmt.Sprintf("-k%d", r.Buckets) // one word: bench-ratios.sh reads the table by columns
		}
		if r.NoEvents {
			label += "-noevents"
		}
		printf("| %s | %d | %d | %.0f | %s | %.2fms | %s |\n", label, r.Conns, r.Orders, r.OrdersPerSecond(), perCommit,
			float64(r.P99.Microseconds())/1000, cpu)
	}
}

// parseFloorStrategies parses -strategies: lua, lock and lua-async.
func parseFloorStrategies(s string) ([]stock.StrategyName, error) {
	var out []stock.StrategyName
	for _, f := range strings.Split(s, ",") {
		n := stock.StrategyName(strings.TrimSpace(f))
		if n != stock.StrategyLua && n != stock.StrategyLock && n != stock.StrategyLuaAsync {
			return nil, fmt.Errorf("%q: want lua, lock or lua-async", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseConns parses -conns: concurrencies from 1 to 4096.
func parseConns(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("%q: want whole numbers from 1 to 4096", f)
		}
		out = append(out, n)
	}
	return out, nil
}
