//go:build drill

package app_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// stallRequestTimeout is the request bound of the stall tests: well above
// the one-second outage bounds (Redis calls, the database write budget), so
// an answer that comes from those bounds is told apart from one that only
// the request's deadline produced.
const stallRequestTimeout = 4 * time.Second

// A backend that stalls (connections accepted, nothing answered) or slows
// down (300 ms on every reply), during a sale, with each strategy: every
// order is answered within the request timeout, over a connection that
// stays up; a stalled database gets its 503s from the one-second write
// budget, not from the request's deadline. Once the fault heals nothing was
// lost: every 2xx has its order, the item sells exactly its stock, and the
// gate agrees with the database.
func TestDrillStalledBackends(t *testing.T) {
	type fault struct {
		name        string
		start, heal func(redisProxy, dbProxy *testenv.Proxy)
		// outageBound, when set, is how soon a 503 must come: the
		// outage's own bound, well under the request timeout.
		outageBound time.Duration
	}
	faults := []fault{
		{name: "redis stalled", start: func(r, _ *testenv.Proxy) { r.Stall() }, heal: func(r, _ *testenv.Proxy) { r.Heal() }},
		{name: "database stalled", start: func(_, d *testenv.Proxy) { d.Stall() }, heal: func(_, d *testenv.Proxy) { d.Heal() },
			outageBound: 3 * time.Second},
		{name: "redis slow", start: func(r, _ *testenv.Proxy) { r.Latency(300 * time.Millisecond) },
			heal: func(r, _ *testenv.Proxy) { r.Latency(0) }},
		{name: "database slow", start: func(_, d *testenv.Proxy) { d.Latency(300 * time.Millisecond) },
			heal: func(_, d *testenv.Proxy) { d.Latency(0) }},
	}
	type stallCase struct {
		fault
		strategy string
	}
	var cases []stallCase
	for _, f := range faults {
		for _, strategy := range []string{"lua", "lock", "lua-async"} {
			cases = append(cases, stallCase{f, strategy})
		}
	}
	// Each fault and strategy has its own backends, proxies and service, so
	// the twelve run at once (parallel subtests): a
	// stalled or slowed backend costs little CPU.
	testenv.EachParallel(t, cases, func(c stallCase) string { return c.name + "/" + c.strategy }, func(t *testing.T, sc stallCase) {
		f, strategy := sc.fault, sc.strategy
		b := testenv.Real(t)
		ru, err := url.Parse(b.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		dsn, err := gomysql.ParseDSN(b.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		redisProxy := testenv.NewProxy(t, ru.Host)
		dbProxy := testenv.NewProxy(t, dsn.Addr)
		proxied := *dsn
		proxied.Addr = dbProxy.Addr()
		c := serveApp(t, app.Config{RedisURL: "redis://" + redisProxy.Addr() + ru.Path, MySQLDSN: proxied.FormatDSN(),
			KeyPrefix: b.KeyPrefix, AdminToken: apptest.Token, RequestTimeout: stallRequestTimeout})
		db, err := sql.Open("mysql", b.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		rdb := b.Redis(t)
		const stock = 20
		it := c.CreateItem(t, stock, strategy)
		// A few sales before the fault: the item is cached and its
		// gate seeded, as in a sale under way.
		var mu sync.Mutex
		var answers []stallAnswer
		record := func(a stallAnswer) {
			mu.Lock()
			defer mu.Unlock()
			answers = append(answers, a)
		}
		for i := 0; i < 3; i++ {
			record(order(c, it.ID, fmt.Sprintf("Before-%d", i)))
		}

		f.start(redisProxy, dbProxy)
		faultAt := time.Now()
		var during []stallAnswer
		var wg sync.WaitGroup
		for w := 0; w < 12; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Since(faultAt) < 3*time.Second; n++ {
					a := order(c, it.ID, fmt.Sprintf("During-%02d-%03d", w, n))
					record(a)
					mu.Lock()
					during = append(during, a)
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // a shared 2-core box
				}
			}()
		}
		wg.Wait()
		f.heal(redisProxy, dbProxy)

		var worst, worst503 time.Duration
		counts := map[string]int{}
		for _, a := range during {
			worst = max(worst, a.took)
			counts[a.outcome()]++
			switch {
			case a.err != nil:
				t.Errorf("%s: no answer after %v: %v", a.user, a.took.Round(time.Millisecond), a.err)
			case a.took > stallRequestTimeout+deadlineSlack:
				t.Errorf("%s: answered %d after %v, want within the %v request timeout (+%v)", a.user, a.status, a.took, stallRequestTimeout, deadlineSlack)
			case !slices.Contains([]int{200, 201, 202, 409, 503}, a.status):
				t.Errorf("%s: got %d %s, want 2xx, 409 or 503", a.user, a.status, a.code)
			}
			if a.status == 503 {
				worst503 = max(worst503, a.took)
				if f.outageBound > 0 && strategy != "lua-async" && a.took > f.outageBound {
					t.Errorf("%s: 503 after %v, want within %v (the database write budget, not the request timeout)", a.user, a.took, f.outageBound)
				}
			}
		}
		t.Logf("during the fault: %d orders %v; slowest answer %v, slowest 503 %v", len(during), counts,
			worst.Round(time.Millisecond), worst503.Round(time.Millisecond))

		// Healed: every buyer who heard no definite answer retries
		// with the same key, then new buyers come until the item is
		// sold out.
		for i, a := range answers {
			for try := 0; a.status == 503 || a.err != nil; try++ {
				if try == 50 {
					t.Fatalf("%s after the heal: still %d %v", a.user, a.status, a.err)
				}
				time.Sleep(100 * time.Millisecond)
				a = order(c, it.ID, a.user)
			}
			answers[i] = a
		}
		// A write whose outcome was unknown keeps its unit until the
		// database says whether it committed (a second or two after
		// the heal), and buyers meanwhile may hear sold_out: new
		// buyers keep coming until the database has sold the stock.
		for n, deadline := 0, time.Now().Add(30*time.Second); dbSold(t, db, it.ID) < stock; n++ {
			if time.Now().After(deadline) {
				t.Fatalf("after the heal: database not sold out after %d more buyers", n)
			}
			a := order(c, it.ID, fmt.Sprintf("After-%03d", n))
			if a.status != 201 && a.status != 202 {
				time.Sleep(100 * time.Millisecond)
			}
			answers = append(answers, a)
		}
		checkSale(t, db, rdb, b.KeyPrefix, it.ID, stock, strategy, answers)
	})
}

// dbSold reads the item's sold count from the database.
func dbSold(t *testing.T, db *sql.DB, itemID int64) int64 {
	t.Helper()
	var sold int64
	if err := db.QueryRow("SELECT sold FROM items WHERE id = ?", itemID).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	return sold
}

// stallAnswer is one order attempt and what it got.
type stallAnswer struct {
	user   string
	status int
	code   string
	took   time.Duration
	err    error
}

func (a stallAnswer) outcome() string {
	if a.err != nil {
		return "no answer"
	}
	if a.code != "" {
		return strconv.Itoa(a.status) + " " + a.code
	}
	return strconv.Itoa(a.status)
}

// order places one order for user, keyed by the user's name.
func order(c *apptest.Client, itemID int64, user string) stallAnswer {
	start := time.Now()
	r, err := c.PlaceOrder(itemID, user, "key-"+user)
	return stallAnswer{user: user, status: r.Status, code: r.ErrorCode(), took: time.Since(start), err: err}
}

// checkSale waits for the item to settle (lua-async orders written,
// reservations handed back), then checks it sold exactly its stock, every
// 2xx has its order, no user holds two, and the gate agrees with the
// database.
func checkSale(t *testing.T, db *sql.DB, rdb *redis.Client, prefix string, itemID, stock int64, strategy string, answers []stallAnswer) {
	t.Helper()
	ctx := context.Background()
	tag := prefix + ":{item:" + strconv.FormatInt(itemID, 10) + "}"
	var sold, orders, taken int64
	settled := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := db.QueryRowContext(ctx, "SELECT sold, (SELECT COUNT(*) FROM orders WHERE item_id = ?) FROM items WHERE id = ?", itemID, itemID).Scan(&sold, &orders); err != nil {
			t.Fatal(err)
		}
		var err error
		if taken, err = rdb.HGet(ctx, tag+":meta", "taken").Int64(); err != nil {
			t.Fatalf("gate: %v", err)
		}
		queued, err := rdb.XLen(ctx, tag+":orders").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if sold == stock && (strategy == "lock" || taken == sold) && queued == 0 {
			settled = true
			break
		}
	}
	if !settled || orders != sold {
		t.Errorf("after the heal: database sold %d with %d orders, gate taken %d; want %d, %d and (lua, lua-async) %d",
			sold, orders, taken, stock, stock, stock)
	}
	owners := map[string]int{}
	rows, err := db.QueryContext(ctx, "SELECT user_id FROM orders WHERE item_id = ?", itemID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		owners[u]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for u, n := range owners {
		if n != 1 {
			t.Errorf("user %s holds %d orders", u, n)
		}
	}
	for _, a := range answers {
		if a.status/100 == 2 && owners[a.user] != 1 {
			t.Errorf("%s got %d but has no order in the database", a.user, a.status)
		}
	}
}

// testLogWriter sends the service's log to the test log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// serveApp runs the service on a loopback listener with its real HTTP
// server (its timeouts included), and stops it at cleanup.
func serveApp(t *testing.T, cfg app.Config) *apptest.Client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("start app: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, l, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		_ = a.Close()
	})
	c := apptest.NewClient("http://"+l.Addr().String(), apptest.Token)
	// An answer that never comes shows as a transport error.
	c.HTTP.Timeout = stallRequestTimeout + 10*time.Second
	return c
}
