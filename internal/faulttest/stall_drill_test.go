//go:build drill

package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The stall drills bound a latency, so they are not part of the parallel
// suite: `make drill` runs them one package at a time, after the suite (`make test` runs both).
// A backend stalls (connections held open, no bytes, no RST) while
// buyers order, view items and use a waiting room; every answer must come
// within the outage's own bound, at the default timeouts:
//
//   - Redis stalled: SECKILL_REDIS_TIMEOUT (1 s) plus its one retry, with
//     half a second of slack for a loaded machine: 2.5 s.
//   - the database stalled: SECKILL_DB_TIMEOUT (1 s) for each step of an
//     order's transaction, after whatever lock wait a lock order spent
//     (2.0 s measured for lua and lock, with two instances sharing the
//     item's lock), with the same slack: 2.5 s.
const (
	drillRedisBound = 2500 * time.Millisecond
	drillDBBound    = 2500 * time.Millisecond
	// drillLoad is how long the buyers keep coming while the backend is
	// stalled: past every bound, so calls queued behind stalled ones are
	// seen too.
	drillLoad     = 4 * time.Second
	drillWorkers  = 32
	drillRoomRate = 100
)

var drillStrategies = []string{"lua", "lua-async", "lock"}

// TestDrillRedisStalled: one Redis, stalled through a proxy.
func TestDrillRedisStalled(t *testing.T) {
	for _, strategy := range drillStrategies {
		t.Run(strategy, func(t *testing.T) {
			b := testenv.Real(t)
			ru, err := url.Parse(b.RedisURL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.NewProxy(t, ru.Host)
			be := realBackends(b)
			be.redisURL = "redis://" + proxy.Addr() + ru.Path
			svc := startService(t, "seckill", "", be, drillEnv())
			sale := newDrillSale(t, svc.c, strategy)
			proxy.Stall()
			answers := sale.fire(drillLoad)
			proxy.Heal()
			sale.check(answers, drillRedisBound, true)
			sale.awaitServed()
		})
	}
}

// TestDrillDatabaseStalled: MariaDB stalled through a proxy. Only the
// paths that write are bounded by it: orders (lua-async ones are queued in
// Redis and answer 202); item views and the room answer from Redis.
func TestDrillDatabaseStalled(t *testing.T) {
	for _, strategy := range drillStrategies {
		t.Run(strategy, func(t *testing.T) {
			b := testenv.Real(t)
			dsn, err := gomysql.ParseDSN(b.MySQLDSN)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.NewProxy(t, dsn.Addr)
			proxied := *dsn
			proxied.Addr = proxy.Addr()
			be := realBackends(b)
			be.dsn = proxied.FormatDSN()
			// Two instances: a lock order of one waits for the item's
			// lock that the other's writer holds.
			svc := startService(t, "seckill-1", "", be, drillEnv())
			other := startService(t, "seckill-2", "", be, drillEnv())
			sale := newDrillSale(t, svc.c, strategy)
			sale.also(other.c)
			proxy.Stall()
			answers := sale.fire(drillLoad)
			proxy.Heal()
			sale.check(answers, drillDBBound, false)
			sale.awaitServed()
		})
	}
}

// TestDrillClusterMasterStalled: a private Redis Cluster whose master of
// the item's slot is stopped (SIGSTOP: its connections stay open and
// nothing answers). Full coverage is off, as OPERATIONS advises, so the
// other masters' items keep selling.
func TestDrillClusterMasterStalled(t *testing.T) {
	for _, strategy := range drillStrategies {
		t.Run(strategy, func(t *testing.T) {
			cluster := testenv.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
			b := testenv.Real(t)
			be := realBackends(b)
			be.redisURL = cluster.URL()
			env := drillEnv()
			env["SECKILL_REDIS_MODE"] = "cluster"
			svc := startService(t, "seckill", "", be, env)
			sale := newDrillSale(t, svc.c, strategy)
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cluster.Nodes[0].Addr()}})
			defer rdb.Close()
			master, err := rdb.MasterForKey(context.Background(), b.KeyPrefix+":{item:"+strconv.FormatInt(sale.item, 10)+"}:meta")
			if err != nil {
				t.Fatal(err)
			}
			pid := redisPID(t, master)
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			}
			defer resume()
			answers := sale.fire(drillLoad)
			resume()
			// The room item may live on another master: only the
			// bound is checked, not that everything failed.
			sale.check(answers, drillRedisBound, false)
			sale.awaitServed()
		})
	}
}

// drillEnv is the service's configuration in a drill: the defaults, with
// the per-user rate limit on (its Redis call is on every order's path).
func drillEnv() map[string]string {
	return map[string]string{"SECKILL_RATE_USER": "1000/s"}
}

// redisPID is the process id of the Redis node c talks to.
func redisPID(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO server of %s", c.Options().Addr)
	return 0
}

// drillSale is an item on sale with the strategy, and an item with a
// waiting room, each seen working before the fault.
type drillSale struct {
	t        *testing.T
	c        *apptest.Client
	cs       []*apptest.Client // the instances the buyers go to, c first
	strategy string
	item     int64
	room     int64
	ticket   string
}

func newDrillSale(t *testing.T, c *apptest.Client, strategy string) *drillSale {
	t.Helper()
	s := &drillSale{t: t, c: c, cs: []*apptest.Client{c}, strategy: strategy, item: c.CreateItem(t, 100000, strategy).ID,
		room: c.CreateItem(t, 100000, strategy).ID}
	r := c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(s.room)+"/waiting-room",
		map[string]any{"admit_per_second": drillRoomRate}, true, nil)
	if r.Status != 200 {
		t.Fatalf("turn the room on: got %d %s", r.Status, r.Body)
	}
	for i := range 3 {
		if r, err := c.PlaceOrder(s.item, fmt.Sprintf("before-%d", i), ""); err != nil || r.Status/100 != 2 {
			t.Fatalf("an order before the fault: got %d %s %v", r.Status, r.Body, err)
		}
	}
	r = c.Must(t, "POST", "/api/v1/items/"+itoa(s.room)+"/queue", map[string]string{"user_id": "before-room"}, false, nil)
	if r.Status != 200 {
		t.Fatalf("a join before the fault: got %d %s", r.Status, r.Body)
	}
	var tk struct {
		Ticket string `json:"ticket"`
	}
	r.JSON(t, &tk)
	s.ticket = tk.Ticket
	return s
}

// also sends half the buyers to another instance, seen working first.
func (s *drillSale) also(c *apptest.Client) {
	s.t.Helper()
	if r, err := c.PlaceOrder(s.item, "before-other", ""); err != nil || r.Status/100 != 2 {
		s.t.Fatalf("an order on the other instance before the fault: got %d %s %v", r.Status, r.Body, err)
	}
	s.cs = append(s.cs, c)
}

// drillAnswer is one request during the fault.
type drillAnswer struct {
	kind   string
	status int
	code   string
	took   time.Duration
	err    error
}

// fire sends orders, item views, room joins and a ticket's status from
// drillWorkers buyers for d, each buyer one request at a time.
func (s *drillSale) fire(d time.Duration) []drillAnswer {
	kinds := []struct {
		name string
		do   func(c *apptest.Client, n string) (apptest.Response, error)
	}{
		{"order", func(c *apptest.Client, n string) (apptest.Response, error) {
			return c.PlaceOrder(s.item, "buyer-"+n, "key-"+n)
		}},
		{"item view", func(c *apptest.Client, _ string) (apptest.Response, error) {
			return c.Do("GET", "/api/v1/items/"+itoa(s.item), nil, false, nil)
		}},
		{"room join", func(c *apptest.Client, n string) (apptest.Response, error) {
			return c.Do("POST", "/api/v1/items/"+itoa(s.room)+"/queue", map[string]string{"user_id": "joiner-" + n}, false, nil)
		}},
		{"room status", func(c *apptest.Client, _ string) (apptest.Response, error) {
			return c.Do("GET", "/api/v1/items/"+itoa(s.room)+"/queue/"+s.ticket, nil, false, nil)
		}},
	}
	var mu sync.Mutex
	var answers []drillAnswer
	var wg sync.WaitGroup
	start := time.Now()
	for w := range drillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Since(start) < d; n++ {
				k := kinds[(w+n)%len(kinds)]
				began := time.Now()
				r, err := k.do(s.cs[w%len(s.cs)], fmt.Sprintf("%d-%d", w, n))
				a := drillAnswer{kind: k.name, status: r.Status, code: r.ErrorCode(), took: time.Since(began), err: err}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return answers
}

// check fails the drill for an answer slower than bound, or none at all;
// with all503 every order and room join must be a 503 (the backend they
// need is stalled). It logs each kind's slowest answer and slowest 503.
func (s *drillSale) check(answers []drillAnswer, bound time.Duration, all503 bool) {
	t := s.t
	type tally struct {
		counts           map[string]int
		slowest, slow503 time.Duration
	}
	kinds := map[string]*tally{}
	for _, a := range answers {
		k := kinds[a.kind]
		if k == nil {
			k = &tally{counts: map[string]int{}}
			kinds[a.kind] = k
		}
		outcome := strconv.Itoa(a.status)
		if a.code != "" {
			outcome += " " + a.code
		}
		if a.err != nil {
			outcome = "no answer"
		}
		k.counts[outcome]++
		k.slowest = max(k.slowest, a.took)
		if a.status == 503 {
			k.slow503 = max(k.slow503, a.took)
		}
		switch {
		case a.err != nil:
			t.Errorf("%s: no answer after %v: %v", a.kind, a.took.Round(time.Millisecond), a.err)
		case a.took > bound:
			t.Errorf("%s: %s after %v, want within %v", a.kind, outcome, a.took.Round(time.Millisecond), bound)
		case all503 && (a.kind == "order" || a.kind == "room join") && a.status != 503:
			t.Errorf("%s: got %s while the backend it needs was stalled, want 503", a.kind, outcome)
		}
	}
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := kinds[n]
		counts, _ := json.Marshal(k.counts)
		t.Logf("%s %s: %s; slowest answer %v, slowest 503 %v", s.strategy, n, counts,
			k.slowest.Round(time.Millisecond), k.slow503.Round(time.Millisecond))
	}
}

// awaitServed waits until an order is taken again after the heal: the
// service came back by itself.
func (s *drillSale) awaitServed() {
	t := s.t
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		r, err := s.c.PlaceOrder(s.item, fmt.Sprintf("after-%d", n), "")
		if err == nil && r.Status/100 == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the heal: orders still refused (%d %s %v)", r.Status, r.Body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
