package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// openFloor opens dbcost's own database the way runFloor does, and a
// handle on it for checking rows; both go at cleanup, and the test checks
// that the database went too.
func openFloor(t *testing.T) (*store.Store, *sql.DB) {
	t.Helper()
	b := testenv.Real(t)
	ctx := context.Background()
	st, drop, err := openStore(ctx, b.MySQLDSN, &store.Options{PaymentTimeout: app.DefaultPaymentTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("seckill_dbcost_%d", os.Getpid())
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		drop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		drop()
		admin, err := sql.Open("mysql", b.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		var n int
		if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("the floor's database %s is still there after drop", name)
		}
	})
	return st, db
}

// checkRows checks the item's rows against what the floor reported: as
// many orders as it counted, sold equal to them and never above stock,
// one order per user, and for the lock strategy, fenced writes.
func checkRows(t *testing.T, db *sql.DB, r floorResult) {
	t.Helper()
	var units, sold, orders, users, fence int64
	// A bucketed item's sold is its rows' (items.sold is not written).
	err := db.QueryRow(`SELECT i.stock, CASE WHEN i.buckets > 1 THEN (SELECT SUM(s.sold) FROM item_stock s WHERE s.item_id = i.id) ELSE i.sold END,
		i.lock_fence, COUNT(o.id), COUNT(DISTINCT o.user_id)
		FROM items i LEFT JOIN orders o ON o.item_id = i.id WHERE i.id = ? GROUP BY i.id`, r.Item).Scan(&units, &sold, &fence, &orders, &users)
	if err != nil {
		t.Fatal(err)
	}
	if r.Buckets > 1 {
		var rowStock, rows int64
		if err := db.QueryRow("SELECT COALESCE(SUM(stock), 0), COUNT(*) FROM item_stock WHERE item_id = ?", r.Item).Scan(&rowStock, &rows); err != nil {
			t.Fatal(err)
		}
		if rowStock != units || rows != int64(r.Buckets) {
			t.Errorf("%s -c%d: %d bucket rows holding %d units; want %d rows holding the item's %d", r.Strategy, r.Conns, rows, rowStock, r.Buckets, units)
		}
	}
	if orders != r.Orders || sold != r.Orders {
		t.Errorf("%s -c%d: %d order rows, sold %d; the floor counted %d", r.Strategy, r.Conns, orders, sold, r.Orders)
	}
	if sold > units {
		t.Errorf("%s -c%d: oversold: sold %d of %d", r.Strategy, r.Conns, sold, units)
	}
	if users != orders {
		t.Errorf("%s -c%d: %d orders for %d users", r.Strategy, r.Conns, orders, users)
	}
	if (fence > 0) != (r.Strategy == stock.StrategyLock) {
		t.Errorf("%s -c%d: lock_fence %d: fenced writes for lock only", r.Strategy, r.Conns, fence)
	}
}

// comCommit is MariaDB's COMMITs so far, server-wide.
func comCommit(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_commit'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Every strategy, one buyer and eight: the floor counts exactly the orders
// it wrote, and commits no more than MariaDB saw (others' commits only add
// to Com_commit); one buyer is one order per commit, and a batch never
// holds more orders than buyers (lua, lock) or the writer batch (lua-async).
func TestFloorCountsWhatItWrote(t *testing.T) {
	st, db := openFloor(t)
	pid, _ := mariadbPID()
	cfg := floorConfig{Strategies: []stock.StrategyName{stock.StrategyLuaAsync, stock.StrategyLua, stock.StrategyLock},
		Conns: []int{1, 8}, Duration: 300 * time.Millisecond, Stock: 1_000_000, Writers: 2, Batch: 20}
	before := comCommit(t, db)
	var results []floorResult
	if err := floor(context.Background(), []floorStore{{st: st}}, pid, cfg, func(r floorResult) { results = append(results, r) }); err != nil {
		t.Fatal(err)
	}
	after := comCommit(t, db)
	if len(results) != 6 {
		t.Fatalf("got %d results, want 6", len(results))
	}
	var commits int64
	for _, r := range results {
		checkRows(t, db, r)
		commits += r.Commits
		most := int64(r.Conns)
		if r.Strategy == stock.StrategyLuaAsync {
			most = int64(cfg.Batch)
		}
		switch {
		case r.Orders == 0 || r.SoldOut:
			t.Errorf("%s -c%d: %d orders, sold out %v; want some, not sold out", r.Strategy, r.Conns, r.Orders, r.SoldOut)
		case r.Commits*most < r.Orders || r.Commits > r.Orders:
			t.Errorf("%s -c%d: %d orders in %d commits; want 1 to %d a commit", r.Strategy, r.Conns, r.Orders, r.Commits, most)
		case r.Conns == 1 && r.Strategy != stock.StrategyLuaAsync && r.Commits != r.Orders:
			t.Errorf("%s -c1: %d orders in %d commits; one buyer commits one at a time", r.Strategy, r.Orders, r.Commits)
		}
	}
	if commits > after-before {
		t.Errorf("counted %d commits; MariaDB saw %d", commits, after-before)
	}
	var out strings.Builder
	row := printFloor(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) })
	row(results[0])
	if want := fmt.Sprintf("| lua-async | 1 | %d |", results[0].Orders); !strings.Contains(out.String(), want) {
		t.Errorf("table %q lacks %q", out.String(), want)
	}
}

// A small stock: every strategy stops by itself once the item sold out,
// long before its time, with exactly the stock sold.
func TestFloorStopsAtSoldOut(t *testing.T) {
	st, db := openFloor(t)
	cfg := floorConfig{Strategies: []stock.StrategyName{stock.StrategyLuaAsync, stock.StrategyLua, stock.StrategyLock},
		Conns: []int{8}, Duration: time.Hour, Stock: 50, Writers: 2, Batch: 20}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, it does not hang CI
	defer cancel()
	err := floor(ctx, []floorStore{{st: st}}, 0, cfg, func(r floorResult) {
		checkRows(t, db, r)
		if !r.SoldOut || r.Orders != cfg.Stock {
			t.Errorf("%s: %d orders, sold out %v; want %d, sold out", r.Strategy, r.Orders, r.SoldOut, cfg.Stock)
		}
		if r.CPU != -1 {
			t.Errorf("%s: MariaDB CPU %.1f with no process to read; want -1 (n/a)", r.Strategy, r.CPU)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The same with four buckets, lua and lua-async: each stops at sold out
// with exactly the stock sold, the bucket rows holding the item's stock,
// lua-async's writers writing each bucket's batches on its row.
func TestFloorBucketsStopAtSoldOut(t *testing.T) {
	st, db := openFloor(t)
	cfg := floorConfig{Strategies: []stock.StrategyName{stock.StrategyLuaAsync, stock.StrategyLua},
		Conns: []int{8}, Duration: time.Hour, Stock: 50, Writers: 2, Batch: 20, Buckets: 4}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := 0
	err := floor(ctx, []floorStore{{st: st}}, 0, cfg, func(r floorResult) {
		runs++
		checkRows(t, db, r)
		if r.Buckets != 4 || !r.SoldOut || r.Orders != cfg.Stock {
			t.Errorf("%s: %d buckets, %d orders, sold out %v; want 4, %d, sold out", r.Strategy, r.Buckets, r.Orders, r.SoldOut, cfg.Stock)
		}
	})
	if err != nil || runs != 2 {
		t.Fatalf("%d runs, %v; want 2", runs, err)
	}
}

func TestParseFloorFlags(t *testing.T) {
	if got, err := parseFloorStrategies("lua, lock,lua-async"); err != nil || len(got) != 3 || got[2] != stock.StrategyLuaAsync {
		t.Errorf("parseFloorStrategies: %v %v", got, err)
	}
	if _, err := parseFloorStrategies("lua,redis"); err == nil {
		t.Error("parseFloorStrategies accepted redis")
	}
	if got, err := parseConns("64, 256"); err != nil || len(got) != 2 || got[1] != 256 {
		t.Errorf("parseConns: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "4097", "64,x"} {
		if _, err := parseConns(bad); err == nil {
			t.Errorf("parseConns(%q) accepted", bad)
		}
	}
}

// -events both: each strategy runs with and then without order events, on
// one database; the rows with events have one created event per order,
// the others none, and the table marks them -noevents.
func TestFloorWithAndWithoutEvents(t *testing.T) {
	b := testenv.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, drop, err := openDB(ctx, b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	stores, err := floorStores(db, "both")
	if err != nil || len(stores) != 2 || stores[0].noEvents || !stores[1].noEvents {
		t.Fatalf("floorStores(both): %+v %v; want with events, then without", stores, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	cfg := floorConfig{Strategies: []stock.StrategyName{stock.StrategyLuaAsync, stock.StrategyLua, stock.StrategyLock},
		Conns: []int{4}, Duration: time.Hour, Stock: 40, Writers: 2, Batch: 20}
	var out strings.Builder
	row := printFloor(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) })
	var results []floorResult
	err = floor(ctx, stores, 0, cfg, func(r floorResult) {
		results = append(results, r)
		row(r)
		checkRows(t, sqlDB, r)
		var events int64
		if err := sqlDB.QueryRow("SELECT COUNT(*) FROM order_events WHERE item_id = ? AND type = 'created'", r.Item).Scan(&events); err != nil {
			t.Fatal(err)
		}
		want := r.Orders
		if r.NoEvents {
			want = 0
		}
		if events != want {
			t.Errorf("%s noevents=%v: %d created events for %d orders, want %d", r.Strategy, r.NoEvents, events, r.Orders, want)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 6 {
		t.Fatalf("%d results, want 6 (3 strategies, with and without events)", len(results))
	}
	for i, r := range results {
		if r.NoEvents != (i%2 == 1) {
			t.Errorf("result %d (%s): noevents %v; want each strategy with, then without", i, r.Strategy, r.NoEvents)
		}
	}
	for _, want := range []string{"| lua | 4 |", "| lua-noevents | 4 |", "| lock-noevents | 4 |", "| lua-async-noevents | 4 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table %q lacks %q", out.String(), want)
		}
	}
}
