package shop

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the Service starts (group-commit writers, lua-async writers,
// sweeper, subscriptions, hand-back retries) has an owner that stops it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLog sends warnings to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestService starts a Service on b, without the sweeper or lua-async
// writers unless cfg asks for them, with its own database handle and Redis
// client (rdb, when given, is used instead). Close runs at cleanup.
func newTestService(t *testing.T, b testenv.Backend, cfg Config, rdb redis.UniversalClient) *Service {
	t.Helper()
	return newTestServiceOn(t, b, newTestStore(t, b, nil), cfg, rdb)
}

// newTestServiceOn is newTestService on st.
func newTestServiceOn(t *testing.T, b testenv.Backend, st *store.Store, cfg Config, rdb redis.UniversalClient) *Service {
	t.Helper()
	if rdb == nil {
		rdb = b.Universal(t)
	}
	cfg.KeyPrefix = b.KeyPrefix
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Queue.Writers == 0 {
		cfg.Queue.Writers = queue.NoWriters
	}
	if cfg.WriteTimeout == 0 {
		// A stall budget for the machine, not for a stall (the tests of
		// stalls set their own): in a full run on two cores a starved
		// database took a step past the 1 s default, and a stampede's
		// order answered 503 (the write may have committed), which these
		// tests count as a wrong answer.
		cfg.WriteTimeout = 10 * time.Second
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
func newTestStore(t testing.TB, b testenv.Backend, opts *store.Options) *store.Store {
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

func users(prefix string, n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return u
}

// ledger is what the database and the gate say about an item.
type ledger struct {
	stock, sold              int64
	created, paid, cancelled int64
	expired, unreturned      int64 // cancelled by the deadline; cancelled without stock_returned_at
	taken, released          int64 // the gate's, -1 without a gate
	gateSoldOut              string
}

func readLedger(t *testing.T, s *Service, rdb *redis.Client, itemID int64) ledger {
	t.Helper()
	ctx := context.Background()
	var l ledger
	if err := rawSQL(t, s.store).QueryRowContext(ctx, "SELECT stock, CASE WHEN buckets > 1 THEN (SELECT SUM(sold) FROM item_stock WHERE item_id = items.id) ELSE sold END FROM items WHERE id = ?", itemID).Scan(&l.stock, &l.sold); err != nil {
		t.Fatal(err)
	}
	rows, err := rawSQL(t, s.store).QueryContext(ctx, "SELECT status, expires_at, updated_at, stock_returned_at FROM orders WHERE item_id = ?", itemID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var expires, returned *time.Time
		var updated time.Time
		if err := rows.Scan(&status, &expires, &updated, &returned); err != nil {
			t.Fatal(err)
		}
		switch status {
		case stock.StatusCreated:
			l.created++
		case stock.StatusPaid:
			l.paid++
		case stock.StatusCancelled:
			l.cancelled++
			o := stock.Order{Status: status, ExpiresAt: expires, UpdatedAt: updated}
			if o.Expired() {
				l.expired++
			}
			if returned == nil {
				l.unreturned++
			}
		default:
			t.Errorf("order with status %q", status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	l.taken, l.released = -1, -1
	meta, err := rdb.HGetAll(ctx, s.keys.Meta(itemID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) > 0 {
		fmt.Sscan(meta["taken"], &l.taken)
		l.gateSoldOut = meta["soldout"]
		if l.released, err = rdb.SCard(ctx, s.keys.Released(itemID)).Result(); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// proxied returns a Redis client that reaches b's Redis through a proxy the
// test can cut, and a direct client to look at the keys.
func proxied(t *testing.T, b testenv.Backend) (*redis.Client, *testenv.Proxy, *redis.Client) {
	t.Helper()
	u, err := url.Parse(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	u.Host = p.Addr() // the rest (the embedded Redis's password) stays
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1 // fail at once while cut
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c, p, b.Redis(t)
}

// asyncService builds a Service on b with the given lua-async writers
// (0: none, this process only admits) and claim idle time.
func asyncService(t *testing.T, b testenv.Backend, st *store.Store, writers int, claimIdle time.Duration, maxDeliveries int) *Service {
	t.Helper()
	if writers == 0 {
		writers = queue.NoWriters
	}
	s, err := NewService(st, b.Redis(t), Config{KeyPrefix: b.KeyPrefix,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queue:  queue.Config{Writers: writers, ClaimIdle: claimIdle, MaxDeliveries: maxDeliveries}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func createAsyncItem(t *testing.T, s *Service, units int64) *stock.Item {
	t.Helper()
	it, err := s.CreateItem(context.Background(), stock.NewItem{Name: "async", Stock: units, Strategy: stock.StrategyLuaAsync})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// awaitWritten waits until every id is a created order, or fails.
func awaitWritten(t *testing.T, s *Service, ids []string, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for _, id := range ids {
		for {
			o, err := s.Order(context.Background(), id)
			if err == nil && o.Status == stock.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("order %s not written within %s: %+v %v", id, wait, o, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// queueOrders places n lua-async orders for users prefix0..prefixN-1 and
// returns their ids.
func queueOrders(t *testing.T, api *Service, itemID int64, n int, prefix string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		o, _, err := api.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: itemID, UserID: fmt.Sprintf("%s%d", prefix, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	return ids
}

// placeAsync places n lua-async orders of users prefix0..prefixN-1.
func placeAsync(t *testing.T, s *Service, itemID int64, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		o, _, err := s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: itemID, UserID: fmt.Sprintf("%s%02d", prefix, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	return ids
}

// eachStrategyParallel runs fn on every strategy, as parallel subtests of t.
func eachStrategyParallel(t *testing.T, fn func(t *testing.T, name stock.StrategyName)) {
	t.Helper()
	for _, name := range stock.Strategies {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			fn(t, name)
		})
	}
}
