package faulttest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
)

// openDB opens the test's database for checking what the service wrote.
func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis url %q: %v", url, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// keys names the service's Redis keys of one item, as internal/stock does.
type keys struct {
	prefix string
	item   int64
	// bucket of buckets, for one bucket of an item with several (their
	// keys follow gate.Keys.Bucket); buckets 0 or 1: the item's own.
	bucket, buckets int
}

func (k keys) base() string {
	if k.buckets > 1 {
		return k.prefix + ":{" + gate.Bucket{Item: k.item, B: k.bucket, K: k.buckets}.Tag() + "}"
	}
	return fmt.Sprintf("%s:{item:%d}", k.prefix, k.item)
}

func (k keys) meta() string   { return k.base() + ":meta" }
func (k keys) buyers() string { return k.base() + ":buyers" }
func (k keys) stream() string { return k.base() + ":orders" }
func (k keys) dead() string   { return k.base() + ":dead" }

// dbState is what the database holds for one item.
type dbState struct {
	stock, sold int64
	orders      map[string]dbOrder  // order id -> row
	byUser      map[string][]string // user -> order ids
	failures    map[string]string   // order id -> reason (order_failures)
}

type dbOrder struct{ user, status string }

func readDB(t *testing.T, db *sql.DB, itemID int64) dbState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := dbState{orders: map[string]dbOrder{}, byUser: map[string][]string{}, failures: map[string]string{}}
	// An item of several buckets sells on its bucket rows, whose stocks
	// sum to its stock.
	var buckets int
	var rowStock sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT stock, buckets,
		CASE WHEN buckets > 1 THEN (SELECT COALESCE(SUM(sold), 0) FROM item_stock WHERE item_id = items.id) ELSE sold END,
		(SELECT SUM(stock) FROM item_stock WHERE item_id = items.id)
		FROM items WHERE id = ?`, itemID).Scan(&st.stock, &buckets, &st.sold, &rowStock); err != nil {
		t.Fatalf("read item %d: %v", itemID, err)
	}
	if buckets > 1 && rowStock.Int64 != st.stock {
		t.Errorf("item %d: its %d bucket rows hold %d units (valid %v), want its stock %d", itemID, buckets, rowStock.Int64, rowStock.Valid, st.stock)
	}
	rows, err := db.QueryContext(ctx, "SELECT id, user_id, status FROM orders WHERE item_id = ?", itemID)
	if err != nil {
		t.Fatalf("read orders: %v", err)
	}
	for rows.Next() {
		var id string
		var o dbOrder
		if err := rows.Scan(&id, &o.user, &o.status); err != nil {
			t.Fatalf("read orders: %v", err)
		}
		st.orders[id] = o
		st.byUser[o.user] = append(st.byUser[o.user], id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatalf("read orders: %v", err)
	}
	rows, err = db.QueryContext(ctx, "SELECT id, reason FROM order_failures WHERE item_id = ?", itemID)
	if err != nil {
		t.Fatalf("read order_failures: %v", err)
	}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatalf("read order_failures: %v", err)
		}
		st.failures[id] = reason
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatalf("read order_failures: %v", err)
	}
	return st
}

// problems collects failed checks of one kind and reports the first few.
type problems struct {
	t    *testing.T
	what string
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) report() {
	p.t.Helper()
	if len(p.list) == 0 {
		return
	}
	shown := p.list[:min(len(p.list), 8)]
	p.t.Errorf("%s: %d problems:\n  %s%s", p.what, len(p.list), strings.Join(shown, "\n  "),
		map[bool]string{true: "\n  ..."}[len(p.list) > len(shown)])
}

// checkAcked checks that every acknowledged attempt that counts is in the
// database as a created order of its user.
func checkAcked(t *testing.T, as []attempt, st dbState, counts func(attempt) bool) {
	t.Helper()
	p := &problems{t: t, what: "acknowledged orders missing from the database"}
	for _, a := range as {
		if a.class != acked || (counts != nil && !counts(a)) {
			continue
		}
		o, ok := st.orders[a.orderID]
		switch {
		case !ok:
			p.add("order %s of %s (answered %d at %s) is not in orders (order_failures: %q)",
				a.orderID, a.user, a.status, a.end.Format("15:04:05.000"), st.failures[a.orderID])
		case o.user != a.user || o.status != "created":
			p.add("order %s: got user %s status %s, want user %s status created", a.orderID, o.user, o.status, a.user)
		}
	}
	p.report()
}

// checkSold checks the sale against the database's own rows: sold equals
// the rows, is at most the stock, and no user holds two orders.
func checkSold(t *testing.T, st dbState) {
	t.Helper()
	if st.sold != int64(len(st.orders)) || st.sold > st.stock {
		t.Errorf("items.sold = %d with %d order rows and stock %d: want sold == rows <= stock", st.sold, len(st.orders), st.stock)
	}
	p := &problems{t: t, what: "users with more than one order"}
	for u, ids := range st.byUser {
		if len(ids) > 1 {
			p.add("%s holds %v", u, ids)
		}
	}
	p.report()
}

// checkUnackedRows checks that a row no attempt was acknowledged with
// belongs to a user who has an attempt of unknown outcome.
func checkUnackedRows(t *testing.T, as []attempt, st dbState) (unacked int) {
	t.Helper()
	ackedIDs := map[string]bool{}
	uncertain := map[string]bool{}
	for _, a := range as {
		switch a.class {
		case acked:
			ackedIDs[a.orderID] = true
		case unknown:
			uncertain[a.user] = true
		}
	}
	p := &problems{t: t, what: "orders no client was told of, of users whose every answer was definite"}
	for id, o := range st.orders {
		if ackedIDs[id] {
			continue
		}
		unacked++
		if !uncertain[o.user] {
			p.add("order %s of %s", id, o.user)
		}
	}
	p.report()
	return unacked
}

// checkOneOrderPerUser checks that no user was acknowledged two different
// orders among the attempts that count.
func checkOneOrderPerUser(t *testing.T, as []attempt, counts func(attempt) bool) {
	t.Helper()
	seen := map[string]string{}
	p := &problems{t: t, what: "users acknowledged two different orders"}
	for _, a := range as {
		if a.class != acked || (counts != nil && !counts(a)) {
			continue
		}
		if prev, ok := seen[a.user]; ok && prev != a.orderID {
			p.add("%s: %s and %s", a.user, prev, a.orderID)
		}
		seen[a.user] = a.orderID
	}
	p.report()
}

// queueState is an item's stream as Redis has it.
type queueState struct{ length, pending, dead int64 }

func readQueue(t *testing.T, rdb redis.UniversalClient, k keys) queueState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var q queueState
	var err error
	if q.length, err = rdb.XLen(ctx, k.stream()).Result(); err != nil {
		t.Fatalf("XLEN %s: %v", k.stream(), err)
	}
	if q.dead, err = rdb.XLen(ctx, k.dead()).Result(); err != nil {
		t.Fatalf("XLEN %s: %v", k.dead(), err)
	}
	pend, err := rdb.XPending(ctx, k.stream(), "writers").Result()
	switch {
	case err == nil:
		q.pending = pend.Count
	case strings.HasPrefix(err.Error(), "NOGROUP"), errors.Is(err, redis.Nil):
	default:
		t.Fatalf("XPENDING %s: %v", k.stream(), err)
	}
	return q
}

// waitDrained polls until the item's stream is empty with nothing pending:
// every admitted order has been persisted and acknowledged. The test fails
// after d.
func waitDrained(t *testing.T, rdb redis.UniversalClient, k keys, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		q := readQueue(t, rdb, k)
		if q.length == 0 && q.pending == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained after %v: %d entries, %d pending, %d dead letters", d, q.length, q.pending, q.dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkQueueEmpty checks that nothing is queued, pending or dead-lettered.
func checkQueueEmpty(t *testing.T, rdb redis.UniversalClient, k keys) {
	t.Helper()
	if q := readQueue(t, rdb, k); q != (queueState{}) {
		t.Errorf("queue after the drain: %d entries, %d pending, %d dead letters; want none", q.length, q.pending, q.dead)
	}
}

// checkGate checks that the item's Redis gate agrees with the database once
// nothing is queued: it has taken exactly the units sold, and its buyers
// are exactly the database's users, each with the order id of their row.
func checkGate(t *testing.T, rdb redis.UniversalClient, k keys, st dbState) {
	t.Helper()
	checkGateBuckets(t, rdb, []keys{k}, st)
}

// gateTaken is the units the gate of ks (an item's buckets) has taken.
func gateTaken(t *testing.T, rdb redis.UniversalClient, ks []keys) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sum int64
	for _, k := range ks {
		taken, err := rdb.HGet(ctx, k.meta(), "taken").Result()
		if err != nil {
			t.Fatalf("HGET %s taken: %v", k.meta(), err)
		}
		n, err := strconv.ParseInt(taken, 10, 64)
		if err != nil {
			t.Fatalf("gate %s taken = %q: %v", k.meta(), taken, err)
		}
		sum += n
	}
	return sum
}

// checkGateBuckets is checkGate for an item of several buckets (ks, one
// each): their taken sum to the database's sold, and their buyers together
// are its users.
func checkGateBuckets(t *testing.T, rdb redis.UniversalClient, ks []keys, st dbState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sum := gateTaken(t, rdb, ks)
	buyers := map[string]string{}
	for _, k := range ks {
		bs, err := rdb.HGetAll(ctx, k.buyers()).Result()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", k.buyers(), err)
		}
		for u, id := range bs {
			buyers[u] = id
		}
	}
	if sum != st.sold {
		t.Errorf("gate %s taken = %d (over %d buckets), want %d (the database's sold)", ks[0].meta(), sum, len(ks), st.sold)
	}
	p := &problems{t: t, what: fmt.Sprintf("gate buyers (%d) against the database's users (%d)", len(buyers), len(st.byUser))}
	for u, ids := range st.byUser {
		if got, ok := buyers[u]; !ok {
			p.add("%s holds order %s in the database but is not a buyer in the gate", u, ids[0])
		} else if got != ids[0] {
			p.add("%s: gate has order %s, database %s", u, got, ids[0])
		}
	}
	var extra []string
	for u := range buyers {
		if _, ok := st.byUser[u]; !ok {
			extra = append(extra, u)
		}
	}
	sort.Strings(extra)
	for _, u := range extra {
		p.add("%s is a buyer in the gate (order %s) with no order in the database", u, buyers[u])
	}
	p.report()
}

// awaitNoMarkers waits up to d for the queued-order markers and their
// indexes under the prefix to be gone, and returns how many are left. A
// writer's ack drops the markers with their entries in one MULTI, and the
// indexes just after (queue.Writers.ack): a drain the test has seen may
// come between the two.
func awaitNoMarkers(t *testing.T, rdb *redis.Client, prefix string, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := countMarkers(t, rdb, prefix)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countMarkers counts the queued-order markers and their indexes left
// under the prefix.
func countMarkers(t *testing.T, rdb *redis.Client, prefix string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, pattern := range []string{prefix + ":order:*", prefix + ":{item:*}:queued:*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("scan markers: %v", err)
		}
	}
	return n
}
