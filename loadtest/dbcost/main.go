// Command dbcost measures what the service's order writes cost MariaDB, by
// batch size: the CPU seconds of the mariadbd process per order and per
// transaction, for the real transactions (store.InsertBatch, the lua and
// lock strategies' group commit; store.PersistQueued, the lua-async
// writers) on the real schema (the migrations, applied to a database of its
// own), with no HTTP, no Redis and no client on the database's cores but
// this one.
//
//	go run ./loadtest/dbcost                        # batches 1,8,32,128,500
//	go run ./loadtest/dbcost -batches 32,256 -orders 50000 -path queued
//
// It fits cost = per-transaction + batch × per-order over the batch sizes,
// the two numbers that say how far a bigger batch can cut the CPU per
// order. MariaDB must run on this machine (its CPU is read from /proc).
//
// With -floor it measures instead what MariaDB alone can do with each
// strategy's order writes at the benchmarks' concurrency (floor.go):
//
//	go run ./loadtest/dbcost -floor                 # lua-async, lua, lock at 64 and 256, 10 s each
//	go run ./loadtest/dbcost -floor -conns 64 -duration 5s -strategies lua
//
// The database it creates is dropped at the end, also after SIGINT or
// SIGTERM.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
)

func main() {
	dsn := flag.String("dsn", "root@tcp(127.0.0.1:3306)/", "MySQL DSN of the server (any database in it is ignored: dbcost makes its own)")
	batches := flag.String("batches", "1,8,32,128,500", "orders per transaction, comma-separated")
	orders := flag.Int("orders", 20000, "orders written for each batch size and path")
	path := flag.String("path", "both", "sync (InsertBatch), queued (PersistQueued) or both")
	floorMode := flag.Bool("floor", false, "measure each strategy's order writes at the given concurrency instead (the floor)")
	strategies := flag.String("strategies", "lua-async,lua,lock", "-floor: the strategies, comma-separated")
	conns := flag.String("conns", "64,256", "-floor: concurrent buyers, comma-separated (each concurrency in turn)")
	duration := flag.Duration("duration", 10*time.Second, "-floor: how long each strategy runs at each concurrency")
	units := flag.Int64("stock", 10_000_000, "-floor: each item's stock (the run stops early if it sells out)")
	writers := flag.Int("writers", queue.DefaultWriters, "-floor: lua-async writer goroutines (SECKILL_WRITERS)")
	writerBatch := flag.Int("writer-batch", queue.DefaultBatch, "-floor: lua-async orders per transaction, at most (SECKILL_WRITER_BATCH)")
	instances := flag.Int("instances", 1, "-floor: the lua item's group-commit writers, as so many service instances (lock keeps one: its Redis lock)")
	events := flag.String("events", "on", "-floor: on (the service's order events, one row per change in its transaction), off (none), or both (each strategy with and then without, in one run: the outbox's cost)")
	buckets := flag.Int("buckets", 1, "-floor: the items' buckets (1 to 64; above 1 they keep their stock in bucket rows: lua and lock have one group-commit writer per bucket, lock a fence per bucket, lua-async -writers writers per bucket)")
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *floorMode {
		cfg := floorConfig{Duration: *duration, Stock: *units, Writers: *writers, Batch: *writerBatch, Buckets: *buckets, Instances: *instances, Events: *events}
		if *events != "on" && *events != "off" && *events != "both" {
			log.Fatalf("dbcost: -events %q: want on, off or both", *events)
		}
		if err := stock.ValidateBuckets(*buckets); err != nil {
			log.Fatalf("dbcost: -buckets: %v", err)
		}
		if *instances < 1 {
			log.Fatal("dbcost: -instances must be at least 1")
		}
		var err error
		if cfg.Strategies, err = parseFloorStrategies(*strategies); err != nil {
			log.Fatalf("dbcost: -strategies: %v", err)
		}
		if cfg.Conns, err = parseConns(*conns); err != nil {
			log.Fatalf("dbcost: -conns: %v", err)
		}
		if cfg.Duration <= 0 || cfg.Stock < 1 || cfg.Writers < 1 || cfg.Batch < 1 || cfg.Batch > queue.DefaultBatch {
			log.Fatalf("dbcost: -duration, -stock and -writers must be positive, -writer-batch from 1 to %d", queue.DefaultBatch)
		}
		if err := runFloor(ctx, *dsn, cfg); err != nil {
			log.Fatalf("dbcost: %v", err)
		}
		return
	}
	sizes, err := parseSizes(*batches)
	if err != nil {
		log.Fatalf("dbcost: -batches: %v", err)
	}
	var paths []string
	switch *path {
	case "sync", "queued":
		paths = []string{*path}
	case "both":
		paths = []string{"sync", "queued"}
	default:
		log.Fatalf("dbcost: -path %q: want sync, queued or both", *path)
	}
	if *orders < 1 {
		log.Fatal("dbcost: -orders must be at least 1")
	}
	pid, err := mariadbPID()
	if err != nil {
		log.Fatalf("dbcost: %v", err)
	}
	st, drop, err := openStore(ctx, *dsn, nil)
	if err != nil {
		log.Fatalf("dbcost: %v", err)
	}
	defer drop()

	fmt.Printf("| path | orders per transaction | orders/s | MariaDB CPU µs per order | per transaction |\n|---|---|---|---|---|\n")
	for _, p := range paths {
		var xs, ys []float64
		for _, size := range sizes {
			perOrder, rate, err := measure(ctx, st, pid, p, size, *orders)
			if err != nil {
				drop()
				log.Fatalf("dbcost: %s, batch %d: %v", p, size, err)
			}
			fmt.Printf("| %s | %d | %.0f | %.1f | %.0f |\n", p, size, rate, perOrder, perOrder*float64(size))
			xs, ys = append(xs, 1/float64(size)), append(ys, perOrder)
		}
		if len(sizes) > 1 {
			// perOrder = fixed/size + row: a line in 1/size.
			fixed, row := fit(xs, ys)
			fmt.Printf("| %s | fit | | %.1f per order + %.0f per transaction | |\n", p, row, fixed)
		}
	}
}

// measure writes n orders of a new item in batches of size through path and
// returns mariadbd's CPU µs per order and the orders written per second.
func measure(ctx context.Context, st *store.Store, pid int, path string, size, n int) (float64, float64, error) {
	strategy := stock.StrategyLua
	if path == "queued" {
		strategy = stock.StrategyLuaAsync
	}
	it := &stock.Item{Name: fmt.Sprintf("dbcost-%s-%d", path, size), Stock: int64(n) * 2, Strategy: strategy}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		return 0, 0, err
	}
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	written := 0
	for written < n {
		k := min(size, n-written)
		now := store.Now()
		if path == "sync" {
			batch := make([]store.OrderWrite, k)
			for i := range batch {
				batch[i] = store.OrderWrite{Order: &stock.Order{ID: uuid.Must(uuid.NewV7()).String(), ItemID: it.ID,
					UserID: fmt.Sprintf("u%d", written+i)}}
			}
			if err := st.InsertBatch(ctx, batch, now, 0, nil); err != nil {
				return 0, 0, err
			}
		} else {
			batch := make([]*store.Queued, k)
			for i := range batch {
				batch[i] = &store.Queued{Entry: fmt.Sprintf("%d-0", written+i), ID: uuid.Must(uuid.NewV7()).String(), ItemID: it.ID,
					UserID: fmt.Sprintf("u%d", written+i), Created: now}
			}
			res, err := st.PersistQueued(ctx, it.ID, batch, now)
			if err != nil {
				return 0, 0, err
			}
			if len(res.Written) != k {
				return 0, 0, fmt.Errorf("%d of %d orders written (already %d, failed %d)", len(res.Written), k, len(res.Already), len(res.Failed))
			}
		}
		written += k
	}
	elapsed := time.Since(start)
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return 0, 0, err
	}
	got, err := st.Item(ctx, it.ID)
	if err != nil {
		return 0, 0, err
	}
	if got.Sold != int64(n) {
		return 0, 0, fmt.Errorf("item sold %d after %d orders", got.Sold, n)
	}
	return (cpu1 - cpu0) / float64(n) * 1e6, float64(n) / elapsed.Seconds(), nil
}

// runFloor runs the floor on a database of its own and prints its table.
// The service's payment deadline is on, as in the service by default: it
// is a column of every order row.
func runFloor(ctx context.Context, dsn string, cfg floorConfig) error {
	pid, err := mariadbPID()
	if err != nil {
		log.Printf("dbcost: %v; no MariaDB CPU figures", err)
	}
	db, drop, err := openDB(ctx, dsn)
	if err != nil {
		return err
	}
	defer drop()
	stores, err := floorStores(db, cfg.Events)
	if err != nil {
		return err
	}
	fmt.Printf("Floor: %s each, stock %d, lua-async with %d writers of up to %d orders; p99: lua and lock, an order's wait for its commit; lua-async, a batch's transaction; -noevents: no order events written (the outbox off).\n\n",
		cfg.Duration, cfg.Stock, cfg.Writers, cfg.Batch)
	return floor(ctx, stores, pid, cfg, printFloor(func(f string, a ...any) { fmt.Printf(f, a...) }))
}

// floorStores are the stores -events asks for, on one database: with the
// order events ("on"), without ("off"), or both, in that order.
func floorStores(db *gorm.DB, events string) ([]floorStore, error) {
	var out []floorStore
	for _, noEvents := range map[string][]bool{"on": {false}, "off": {true}, "both": {false, true}}[events] {
		st, err := store.New(db, &store.Options{PaymentTimeout: app.DefaultPaymentTimeout, WithoutEvents: noEvents})
		if err != nil {
			return nil, err
		}
		out = append(out, floorStore{st: st, noEvents: noEvents})
	}
	return out, nil
}

// openStore creates a database of its own on the server, migrates it and
// returns a store with opts on it, and a func that drops it.
func openStore(ctx context.Context, dsn string, opts *store.Options) (*store.Store, func(), error) {
	db, drop, err := openDB(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.New(db, opts)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return st, drop, nil
}

// openDB creates a database of its own on the server, migrates it and
// returns it, and a func that drops it.
func openDB(ctx context.Context, dsn string) (*gorm.DB, func(), error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("-dsn: %w", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("seckill_dbcost_%d", os.Getpid())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("create database: %w", err)
	}
	dropped := false
	drop := func() {
		if !dropped {
			dropped = true
			if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
				log.Printf("dbcost: drop database %s: %v", name, err)
			}
			admin.Close()
		}
	}
	cfg.DBName = name
	cfg.ParseTime = true
	db, _, _, err := database.Open(ctx, cfg.FormatDSN(), "")
	if err != nil {
		drop()
		return nil, nil, err
	}
	return db, drop, nil
}

// mariadbPID finds the mariadbd (or mysqld) process on this machine.
func mariadbPID() (int, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(b)); c == "mariadbd" || c == "mysqld" {
			return strconv.Atoi(filepath.Base(filepath.Dir(f)))
		}
	}
	return 0, fmt.Errorf("no mariadbd or mysqld process on this machine (its CPU is read from /proc)")
}

// cpuSeconds is a process's user + system CPU seconds.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read /proc/%d/stat: %q", pid, s)
	}
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 500 {
			return nil, fmt.Errorf("%q: want whole numbers from 1 to 500", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// fit is the least-squares line y = a·x + b.
func fit(xs, ys []float64) (a, b float64) {
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	n := float64(len(xs))
	a = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return a, (sy - a*sx) / n
}
