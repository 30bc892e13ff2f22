package app_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// restartOutcome is what one order attempt was answered.
type restartOutcome struct {
	user    string
	status  int
	code    string
	body    string
	orderID string
}

// orderAll places one order per user from workers goroutines.
func orderAll(t *testing.T, c *apptest.Client, itemID int64, users []string, workers int) []restartOutcome {
	t.Helper()
	out := make([]restartOutcome, len(users))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := c.PlaceOrder(itemID, users[i], "")
				if err != nil {
					t.Errorf("order by %s: %v", users[i], err)
					continue
				}
				o := restartOutcome{user: users[i], status: r.Status, code: r.ErrorCode(), body: string(r.Body)}
				if r.Status == http.StatusCreated || r.Status == http.StatusAccepted {
					var ord apptest.Order
					r.JSON(t, &ord)
					o.orderID = ord.ID
				}
				out[i] = o
			}
		}()
	}
	for i := range users {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func userRange(prefix string, from, to int) []string {
	var users []string
	for n := from; n < to; n++ {
		users = append(users, fmt.Sprintf("%s%04d", prefix, n))
	}
	return users
}

// Redis is killed and started again without persistence in the middle of a
// sale, so it comes back empty: gate, lock, fence counter and streams all
// gone. On every strategy nothing is oversold, no 2xx is lost, and once
// Redis is back every order is answered at once (no 503s while a fence
// counter climbs back, say) and the item sells exactly its stock.
//
// lua-async's 202s of orders still queued in Redis are lost with it by
// contract (docs/DESIGN.md, "What a 202 guarantees": none without persistence), so
// the kill comes once they are written.
//
// On a Redis Cluster every node of a private cluster is killed and started
// again: each comes back empty with its slots (nodes.conf).
func TestRedisRestartMidSale(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel() // each backend has its own database and key prefix, each strategy its own Redis
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				server := testenv.StartRedisServer(t, "--appendonly", "no")
				b := b
				b.RedisURL, b.Mini = server.URL(), nil
				restartMidSale(t, b, strategy, server.Kill, server.Start)
			})
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		b := testenv.Cluster(t) // the database and key prefix
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				cluster := testenv.StartCluster(t, 3, 0)
				b := b
				b.RedisURL = cluster.URL()
				restartMidSale(t, b, strategy, cluster.KillAll, cluster.StartAll)
			})
		}
	})
}

// restartMidSale sells an item of strategy on b, with Redis killed and
// started again (empty) in the middle.
func restartMidSale(t *testing.T, b testenv.Backend, strategy string, kill, start func()) {
	_, c := apptest.Start(t, b)
	const stock = 60
	it := c.CreateItem(t, stock, strategy)

	var answered []restartOutcome
	check2xx := func(phase string, outs []restartOutcome, allowed ...int) {
		t.Helper()
		for _, o := range outs {
			ok := o.status == http.StatusCreated || o.status == http.StatusAccepted
			for _, s := range allowed {
				ok = ok || o.status == s
			}
			if !ok {
				t.Errorf("%s: order by %s got %d %s", phase, o.user, o.status, o.body)
			}
			if o.orderID != "" {
				answered = append(answered, o)
			}
		}
	}
	// Before the loss: concurrent orders, then a few one at a
	// time (each takes and releases the lock, so the database's
	// fence is well above 1).
	check2xx("before the restart", orderAll(t, c, it.ID, userRange("early-", 0, 24), 8))
	check2xx("before the restart", orderAll(t, c, it.ID, userRange("early-", 24, 30), 1))
	for _, o := range answered {
		if got := c.AwaitOrder(t, o.orderID, 30*time.Second); got.Status != "created" {
			t.Fatalf("order %s of %s: status %q before the restart, want created", o.orderID, o.user, got.Status)
		}
	}

	kill()
	// While Redis is down: a prompt 503, never a 2xx.
	down := userRange("down-", 0, 5)
	for _, o := range orderAll(t, c, it.ID, down, 5) {
		if o.status != http.StatusServiceUnavailable {
			t.Errorf("order by %s while Redis is down: got %d %s, want 503", o.user, o.status, o.body)
		}
	}
	start()

	// After the restart: the users refused during the outage come
	// back, with more users than units left. Every answer is an
	// order or sold out.
	after := append(down, userRange("late-", 0, 45)...)
	outs := orderAll(t, c, it.ID, after, 8)
	check2xx("after the restart", outs, http.StatusConflict)
	stale := 0
	for _, o := range outs {
		if o.status == http.StatusConflict && o.code != "sold_out" {
			t.Errorf("order by %s after the restart: got %d %s, want sold_out", o.user, o.status, o.body)
		}
		if o.status == http.StatusServiceUnavailable {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d orders answered 503 after Redis was back", stale, len(outs))
	}

	if len(answered) != stock {
		t.Errorf("orders answered 2xx: got %d, want %d (the stock)", len(answered), stock)
	}
	for _, o := range answered {
		if got := c.AwaitOrder(t, o.orderID, 30*time.Second); got.Status != "created" || got.UserID != o.user {
			t.Errorf("order %s answered 2xx to %s: status %q, user %q; want created, %s", o.orderID, o.user, got.Status, got.UserID, o.user)
		}
	}
	var orders, users int64
	if err := b.DB(t).Raw("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE item_id = ?", it.ID).Row().Scan(&orders, &users); err != nil {
		t.Fatal(err)
	}
	got := c.AdminItem(t, it.ID)
	if orders != stock || users != stock || got.Sold != stock || got.Remaining != 0 {
		t.Errorf("%d orders from %d users, sold %d, remaining %d; want %d orders, users and sold, 0 remaining",
			orders, users, got.Sold, got.Remaining, stock)
	}
}
