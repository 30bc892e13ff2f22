package shop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// A lua-async item of four buckets whose database refuses one buyer of
// each bucket (a trigger): the writer, allowed one delivery, splits each
// bucket's batch, writes the others and moves each refused order to its
// own bucket's dead-letter stream (it dead-lettered whole batches before). The admin view
// lists them across the buckets (its limit counts them all), the orders
// stay pending, and once the cause is gone a requeue moves each back to
// its bucket's stream and every order is written, each in its bucket's
// row.
func TestBucketedDeadLettersAndRequeue(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		const k = 4
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0) // no writers: each bucket's orders queue up
		it := createBucketedAs(t, api, stock.StrategyLuaAsync, 20, k)
		db := rawSQL(t, st)
		poison := `CREATE TRIGGER poison BEFORE INSERT ON orders WHEN NEW.user_id LIKE 'poison-%' BEGIN SELECT RAISE(ABORT, 'poisoned by the test'); END`
		if b.MySQLDSN != "" {
			poison = `CREATE TRIGGER poison BEFORE INSERT ON orders FOR EACH ROW BEGIN IF NEW.user_id LIKE 'poison-%' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned by the test'; END IF; END`
		}
		if _, err := db.Exec(poison); err != nil {
			t.Fatalf("create trigger: %v", err)
		}

		var good, poisoned []string // order ids
		for bk := range k {
			for _, u := range append(usersIn(fmt.Sprintf("good%d", bk), it.ID, k, bk, 2), usersIn(fmt.Sprintf("poison-%d", bk), it.ID, k, bk, 1)...) {
				o, _, err := api.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: u})
				if err != nil {
					t.Fatalf("order of %s (bucket %d): %v", u, bk, err)
				}
				if len(u) > 6 && u[:7] == "poison-" {
					poisoned = append(poisoned, o.ID)
				} else {
					good = append(good, o.ID)
				}
			}
		}
		// One writer, one delivery before the dead-letter stream: each
		// bucket's three orders come as one batch, which the database
		// refuses; it is split, and only the refused order is dead-lettered.
		// The default claim window (30 s): one of 200 ms claimed the
		// writer's own entries while a loaded machine wrote them (CI: two
		// good orders past their one delivery, dead-lettered).
		asyncService(t, b, st, 1, 0, 1)
		awaitWritten(t, api, good, 15*time.Second)

		rdb := b.Redis(t)
		deadIn := func() []int64 {
			out := make([]int64, k)
			for bk := range k {
				n, err := rdb.XLen(ctx, api.keys.Bucket(gate.Bucket{Item: it.ID, B: bk, K: k}).Dead).Result()
				if err != nil {
					t.Fatal(err)
				}
				out[bk] = n
			}
			return out
		}
		var dl []stock.DeadLetter
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var err error
			if dl, err = api.DeadLetters(ctx, it.ID, 100); err != nil {
				t.Fatal(err)
			}
			if len(dl) == k || time.Now().After(deadline) {
				break
			}
		}
		listed := map[string]bool{}
		for _, d := range dl {
			listed[d.Order.ID] = true
		}
		for _, id := range poisoned {
			if !listed[id] {
				t.Errorf("refused order %s not among the dead letters %+v", id, dl)
			}
			if o, err := api.Order(ctx, id); err != nil || o.Status != stock.StatusPending {
				t.Errorf("dead-lettered order %s: %+v %v, want it pending", id, o, err)
			}
		}
		if len(dl) != k {
			t.Fatalf("dead letters: got %d, want %d (one refused buyer a bucket)", len(dl), k)
		}
		if got := deadIn(); fmt.Sprint(got) != "[1 1 1 1]" {
			t.Errorf("dead letters per bucket stream: %v, want one in each bucket's own", got)
		}
		if some, err := api.DeadLetters(ctx, it.ID, 3); err != nil || len(some) != 3 {
			t.Errorf("dead letters with limit 3 over %d buckets: got %d %v, want 3", k, len(some), err)
		}

		if _, err := db.Exec("DROP TRIGGER poison"); err != nil {
			t.Fatal(err)
		}
		if n, err := api.RequeueDeadLetters(ctx, it.ID); err != nil || n != k {
			t.Fatalf("requeue: got %d %v, want %d", n, err, k)
		}
		awaitWritten(t, api, poisoned, 15*time.Second)
		if got := deadIn(); fmt.Sprint(got) != "[0 0 0 0]" {
			t.Errorf("dead letters per bucket stream after the requeue: %v, want none", got)
		}
		checkSold(t, api, it.ID, int64(len(good)+len(poisoned)))
		checkBucketRows(t, api, it)
	})
}
