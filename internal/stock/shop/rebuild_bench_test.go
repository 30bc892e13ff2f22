package shop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkRebuild rebuilds the lost gate of a lua item with many buyers
// (SECKILL_BENCH_REBUILD_BUYERS, default 100000) on MariaDB, the whole
// path: the row lock, the database read, the staging and the install. Per
// op: the time the item answers 503 (or waits) after Redis lost it, and
// the memory a rebuild allocates. Point SECKILL_TEST_REDIS_URL at a
// private Redis for large runs. docs/DESIGN.md has the figure for a
// million buyers.
func BenchmarkRebuild(b *testing.B) {
	n := 100000
	if v := os.Getenv("SECKILL_BENCH_REBUILD_BUYERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SECKILL_BENCH_REBUILD_BUYERS=%q: want a positive number", v)
		}
	}
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("buyers=%d/buckets=%d", n, k), func(b *testing.B) {
			be := testenv.Real(b)
			ctx := context.Background()
			st := newTestStore(b, be, nil)
			s, err := NewService(st, be.Universal(b), Config{KeyPrefix: be.KeyPrefix, SweepInterval: -1,
				Logger: slog.New(slog.NewTextHandler(benchLog(), nil))})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			it, err := s.CreateItem(ctx, stock.NewItem{Name: "large", Stock: int64(n) + 100, Strategy: stock.StrategyLua, Buckets: k})
			if err != nil {
				b.Fatal(err)
			}
			insertOrders(b, st, it.ID, n)
			rdb := be.Universal(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				testenv.DeleteKeys(b, rdb, be.KeyPrefix+":*")
				b.StartTimer()
				start := time.Now()
				if err := s.lua.buildGate(ctx, it.ID); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "buyers/s")
			}
			b.StopTimer()
			r, err := s.Reconcile(ctx, it.ID, false)
			if err != nil || len(r.Drift) != 0 || r.Buyers != int64(n) {
				b.Fatalf("after the rebuild: %d buyers, drift %q, %v; want %d and none", r.Buyers, r.Drift, err, n)
			}
		})
	}
}

// insertOrders writes n created orders of item id straight to the
// database, and its sold.
func insertOrders(b *testing.B, st *store.Store, id int64, n int) {
	b.Helper()
	db := rawSQL(b, st)
	now := time.Now().UTC()
	const rows = 2000
	for i := 0; i < n; i += rows {
		var q strings.Builder
		q.WriteString("INSERT INTO orders (id, item_id, user_id, status, created_at, updated_at) VALUES ")
		args := make([]any, 0, 6*rows)
		for j := i; j < min(i+rows, n); j++ {
			if j > i {
				q.WriteString(",")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, uuid.Must(uuid.NewV7()).String(), id, fmt.Sprintf("user-%07d", j), stock.StatusCreated, now, now)
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec("UPDATE items SET sold = ? WHERE id = ?", n, id); err != nil {
		b.Fatal(err)
	}
}

// benchLog is where a benchmark's service logs: stderr with -v, else
// nowhere.
func benchLog() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}
