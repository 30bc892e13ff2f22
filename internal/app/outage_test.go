//go:build drill

package app_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// outageBound is "about a second" with room for -race on a busy machine; it
// checks that an outage never hangs, it is not a performance target.
const outageBound = 3 * time.Second

// Redis unreachable after start: an order answers 503 quickly, /readyz says
// 503, and service resumes when Redis is back.
func TestDrillRedisOutage(t *testing.T) {
	// Each backend and strategy has its own Redis, proxy and service, so the
	// four run at once (parallel subtests): an outage costs little CPU.
	type outageCase struct{ backend, strategy string }
	var cases []outageCase
	for _, b := range testenv.ForEachNames {
		for _, s := range []string{"lua", "lock"} {
			cases = append(cases, outageCase{b, s})
		}
	}
	testenv.EachParallel(t, cases, func(c outageCase) string { return c.backend + "/" + c.strategy }, func(t *testing.T, oc outageCase) {
		b, strategy := testenv.Open(t, oc.backend), oc.strategy
		u, err := url.Parse(b.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := testenv.NewProxy(t, u.Host)
		_, c := apptest.Start(t, b, func(cfg *app.Config) {
			pu := *u
			pu.Host = proxy.Addr() // the rest (the embedded Redis's password) stays
			cfg.RedisURL = pu.String()
			cfg.RedisTimeout = 0 // the production default
		})
		it := c.CreateItem(t, 3, strategy)
		proxy.Cut()
		start := time.Now()
		r, err := c.PlaceOrder(it.ID, "during-outage", "")
		took := time.Since(start)
		if err != nil || r.Status != 503 || r.ErrorCode() != "unavailable" {
			t.Errorf("order during outage: got %d %s %v, want 503 unavailable", r.Status, r.Body, err)
		}
		if took > outageBound {
			t.Errorf("order during outage took %v, want an answer within about a second", took)
		}
		if got := awaitReadyz(t, c, 503); got != 503 {
			t.Errorf("/readyz during outage: got %d, want 503", got)
		}
		proxy.Restore()
		if got := awaitReadyz(t, c, 200); got != 200 {
			t.Errorf("/readyz after outage: got %d, want 200", got)
		}
		r, err = c.PlaceOrder(it.ID, "after-outage", "")
		if err != nil || r.Status != 201 {
			t.Errorf("order after outage: got %d %s %v, want 201", r.Status, r.Body, err)
		}
		if got := c.AdminItem(t, it.ID); got.Sold != 1 || got.Remaining != 2 {
			t.Errorf("item after outage: got sold %d remaining %d, want 1 and 2", got.Sold, got.Remaining)
		}
	})
}

// The database unreachable on the lua path: the order answers 503 and its
// Redis reservation is handed back, so all stock still sells once the
// database returns.
func TestDrillDatabaseOutageHandsBackReservation(t *testing.T) {
	b := testenv.Real(t)
	dsn, err := gomysql.ParseDSN(b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.MySQLDSN = dsn.FormatDSN() })
	it := c.CreateItem(t, 3, "lua")
	rdb := b.Redis(t)
	gate := fmt.Sprintf("%s:{item:%d}:meta", b.KeyPrefix, it.ID)
	buyers := fmt.Sprintf("%s:{item:%d}:buyers", b.KeyPrefix, it.ID)
	// Warm the item cache so the outage hits the order write, not the lookup.
	if r, _ := c.Do("GET", fmt.Sprintf("/api/v1/items/%d", it.ID), nil, false, nil); r.Status != 200 {
		t.Fatalf("item: got %d", r.Status)
	}
	if r, _ := c.PlaceOrder(it.ID, "before", ""); r.Status != 201 {
		t.Fatalf("order before outage: got %d %s", r.Status, r.Body)
	}

	proxy.Cut()
	start := time.Now()
	r, err := c.PlaceOrder(it.ID, "during", "")
	if err != nil || r.Status != 503 || r.ErrorCode() != "unavailable" {
		t.Errorf("order during outage: got %d %s %v, want 503 unavailable", r.Status, r.Body, err)
	}
	if took := time.Since(start); took > outageBound {
		t.Errorf("order during outage took %v, want about a second", took)
	}
	if got := awaitReadyz(t, c, 503); got != 503 {
		t.Errorf("/readyz during outage: got %d, want 503", got)
	}
	ctx := context.Background()
	taken, _ := rdb.HGet(ctx, gate, "taken").Result()
	if n, _ := strconv.Atoi(taken); n != 1 {
		t.Errorf("gate taken after the failed write: got %q, want 1 (reservation handed back)", taken)
	}
	if ok, _ := rdb.HExists(ctx, buyers, "during").Result(); ok {
		t.Error("the failed buyer is still recorded in the gate")
	}

	proxy.Restore()
	for _, user := range []string{"during", "after"} {
		if r, err := c.PlaceOrder(it.ID, user, ""); err != nil || r.Status != 201 {
			t.Errorf("order by %s after outage: got %d %s %v, want 201", user, r.Status, r.Body, err)
		}
	}
	if r, _ := c.PlaceOrder(it.ID, "late", ""); r.Status != 409 || r.ErrorCode() != "sold_out" {
		t.Errorf("order past stock: got %d %s, want 409 sold_out", r.Status, r.Body)
	}
	if got := c.AdminItem(t, it.ID); got.Sold != 3 || got.Remaining != 0 {
		t.Errorf("item after outage: got sold %d remaining %d, want 3 and 0", got.Sold, got.Remaining)
	}
}
