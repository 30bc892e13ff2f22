//go:build drill

package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// deadlineSlack is what an answer may take past the request timeout: room
// for -race on a busy 2-core machine, far below the seconds a wait without
// a bound takes.
const deadlineSlack = time.Second

// Defect 4 of issue 10: with the item's row held by another transaction,
// every order must still be answered within the request timeout, a 503
// unavailable, and nothing may be left half done: once the row is free the
// item sells exactly its stock, and the gate agrees with the database.
func TestDrillHeldItemRowAnswersWithinDeadline(t *testing.T) {
	const reqTimeout = 2 * time.Second
	// Each strategy has its own database, Redis prefix and service, so the
	// two run at once (parallel subtests): their
	// buyers wait on a held row.
	testenv.EachParallel(t, []string{"lua", "lock"}, func(s string) string { return s }, func(t *testing.T, strategy string) {
		b := testenv.Real(t)
		_, c := apptest.Start(t, b, func(cfg *app.Config) {
			cfg.RequestTimeout = reqTimeout
			cfg.LockWait = time.Second
			cfg.DBTimeout = 0 // the default: 1s
		})
		holder, err := sql.Open("mysql", b.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Close() })
		rdb := b.Redis(t)
		const stock, buyers = 5, 40
		it := c.CreateItem(t, stock, strategy)

		// Another transaction holds the item's row.
		ctx := context.Background()
		tx, err := holder.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sold int64
		if err := tx.QueryRowContext(ctx, "SELECT sold FROM items WHERE id = ? FOR UPDATE", it.ID).Scan(&sold); err != nil {
			t.Fatal(err)
		}
		users := make([]string, buyers)
		for i := range users {
			users[i] = fmt.Sprintf("Held-%s-%02d", strategy, i)
		}
		type answer struct {
			status int
			code   string
			took   time.Duration
			err    error
		}
		answers := make([]answer, buyers)
		var wg sync.WaitGroup
		for i, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				r, err := c.PlaceOrder(it.ID, u, "")
				answers[i] = answer{r.Status, r.ErrorCode(), time.Since(start), err}
			}()
		}
		wg.Wait()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		// The lua gate admits as many as the stock and refuses the rest
		// at once: they never reach the database.
		var worst time.Duration
		unavailable := 0
		for i, a := range answers {
			worst = max(worst, a.took)
			switch {
			case a.err != nil:
				t.Errorf("order by %s while the row was held: no answer after %v: %v", users[i], a.took, a.err)
			case a.took > reqTimeout+deadlineSlack:
				t.Errorf("order by %s while the row was held: answered after %v, want within the %v request timeout (+%v)", users[i], a.took, reqTimeout, deadlineSlack)
			case a.status == 503 && a.code == "unavailable":
				unavailable++
			case strategy == "lua" && a.status == 409 && a.code == "sold_out":
			default:
				t.Errorf("order by %s while the row was held: got %d %s, want 503 unavailable", users[i], a.status, a.code)
			}
		}
		if strategy == "lock" && unavailable != buyers || unavailable < stock {
			t.Errorf("orders while the row was held: %d answered 503 unavailable, want %d", unavailable, map[bool]int{true: buyers, false: stock}[strategy == "lock"])
		}
		t.Logf("%d orders while the row was held: %d answered 503, slowest answer %v (request timeout %v)", buyers, unavailable, worst.Round(time.Millisecond), reqTimeout)

		// The row is free: the same buyers try again until each has a
		// definite answer, then new buyers come until the item is sold
		// out in the database. A write whose outcome was unknown (it
		// failed in its commit) keeps its unit until the database says
		// the order is not there, a second or two: buyers meanwhile
		// may hear sold_out, so new buyers keep coming until the
		// database has sold the stock. Exactly the stock sells.
		created := 0
		buy := func(u string) (definite bool) {
			r, err := c.PlaceOrder(it.ID, u, "")
			switch {
			case err == nil && r.Status == 201:
				created++
				return true
			case err == nil && r.Status == 409:
				return r.ErrorCode() == "sold_out" || r.ErrorCode() == "already_purchased"
			}
			return false
		}
		for _, u := range users {
			for deadline := time.Now().Add(15 * time.Second); !buy(u); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("retry by %s after the row was freed: no definite answer", u)
				}
			}
		}
		for n, deadline := 0, time.Now().Add(15*time.Second); c.AdminItem(t, it.ID).Sold < stock; n++ {
			if time.Now().After(deadline) {
				t.Fatalf("after the row was freed: not sold out in the database after %d more buyers", n)
			}
			buy(fmt.Sprintf("After-%s-%03d", strategy, n))
			time.Sleep(50 * time.Millisecond)
		}
		got := c.AdminItem(t, it.ID)
		if created != stock || got.Sold != stock {
			t.Errorf("after the row was freed: %d orders created, database sold %d; want %d and %d", created, got.Sold, stock, stock)
		}
		if strategy == "lua" {
			tag := b.KeyPrefix + ":{item:" + strconv.FormatInt(it.ID, 10) + "}"
			taken, err := rdb.HGet(ctx, tag+":meta", "taken").Int64()
			if err != nil || taken != got.Sold {
				t.Errorf("gate taken: got %d (%v), want %d as the database sold", taken, err, got.Sold)
			}
		}
	})
}
