package shop

import (
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// testLog sends warnings to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestService starts a Service on b, without the sweeper or lua-async
// writers unless cfg asks for them, with its own database handle and Redis
// client (rdb, when given, is used instead). Close runs at cleanup.
func newTestService(t *testing.T, b testenv.Backend, cfg Config, rdb *redis.Client) *Service {
	t.Helper()
	return newTestServiceOn(t, b, newTestStore(t, b, nil), cfg, rdb)
}

// newTestServiceOn is newTestService on st.
func newTestServiceOn(t *testing.T, b testenv.Backend, st *store.Store, cfg Config, rdb *redis.Client) *Service {
	t.Helper()
	if rdb == nil {
		rdb = b.Redis(t)
	}
	cfg.KeyPrefix = b.KeyPrefix
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Queue.Writers == 0 {
		cfg.Queue.Writers = queue.NoWriters
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewService(st, rdb, cfg)
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// testDBs holds the database handle under each test store, for fixtures
// and checks that read or write rows directly.
var testDBs sync.Map // *store.Store -> *sql.DB

// newTestStore opens a Store on b's database with opts.
func newTestStore(t *testing.T, b testenv.Backend, opts *store.Options) *store.Store {
	t.Helper()
	db := b.DB(t)
	st, err := store.New(db, opts)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	testDBs.Store(st, sqlDB)
	t.Cleanup(func() { testDBs.Delete(st) })
	return st
}

// rawSQL is the database handle under st (made by newTestStore).
func rawSQL(t testing.TB, st *store.Store) *sql.DB {
	t.Helper()
	v, ok := testDBs.Load(st)
	if !ok {
		t.Fatal("store not made by newTestStore")
	}
	return v.(*sql.DB)
}

// fakeClock is a settable time for the memo.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
