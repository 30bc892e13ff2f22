//go:build drill

package faulttest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// recoveryTarget is the promise: every acknowledged order is in the
// database within 3 s of a kill -9 of the process holding it.
// recoverySlack is added for a busy 2-core machine running -race binaries;
// the figure itself is logged (and measured in docs/BENCHMARKS.md).
const (
	recoveryTarget = 3 * time.Second
	recoverySlack  = 3 * time.Second
)

// A process holding a batch of acknowledged lua-async orders in a
// transaction stalled on the database (the item row is locked) keeps
// them while another process runs beside it for longer than the lease and
// ClaimIdle (at the 5 s floor): nothing is stolen or delivered twice. Then it is
// killed with SIGKILL, and the survivor has every acknowledged order in
// the database within seconds, not after ClaimIdle. Before the leases the
// survivor waited the whole ClaimIdle (30 s by default); and with a small
// ClaimIdle it stole the stalled writer's entries.
//
// It bounds a latency, so it is a drill (make drill).
func TestDrillKilledWriterTakenOverInSeconds(t *testing.T) {
	// 30s is the default: recovery must not wait for it. 5s is the floor:
	// a stall longer than it must not let a survivor steal the batch.
	for _, claimIdle := range []string{"30s", "5s"} {
		for _, victim := range []string{"worker", "service"} {
			t.Run(victim+"/claim-idle-"+claimIdle, func(t *testing.T) {
				// Each has its own database and key prefix; the others
				// beside it mostly wait out their stalls, so the recovery
				// it times is not starved. The test itself is not parallel:
				// the loads of the other tests do not run beside it.
				t.Parallel()
				killHolder(t, victim, claimIdle)
			})
		}
	}
}

func killHolder(t *testing.T, victimKind, claimIdle string) {
	const orders = 200
	b := testenv.Real(t)
	be := realBackends(b)
	be.claimIdle = claimIdle
	rdb := redisClient(t, b.RedisURL)
	db := openDB(t, b.MySQLDSN)

	// Orders are admitted by a service without writers and queue up.
	_, it, ids := queueWithoutWriters(t, be, orders, "Held-u")
	k := keys{prefix: b.KeyPrefix, item: it.ID}

	// The database stalls: the item row is held. The victim (a worker or a
	// service with writers) reads the queue as one batch and its
	// transaction waits on the row.
	unlock := lockItemRow(t, db, it.ID)
	defer unlock()
	var victim *proc
	if victimKind == "service" {
		victim = startService(t, "victim-service", "", be, nil).proc
	} else {
		victim = startWorker(t, "victim-worker", be, nil, true).proc
	}
	host, _ := os.Hostname()
	victimPrefix := fmt.Sprintf("%s-%d-", host, victim.cmd.Process.Pid)
	awaitHeldBy(t, rdb, k, victimPrefix, orders, 15*time.Second)

	// A survivor beside it, for longer than the lease and ClaimIdle.
	var survivorMetrics string
	var survivor *proc
	if victimKind == "service" {
		s := startService(t, "survivor-service", "", be, nil)
		survivor, survivorMetrics = s.proc, "http://"+s.addr+"/metrics"
	} else {
		w := startWorker(t, "survivor-worker", be, nil, true)
		survivor, survivorMetrics = w.proc, "http://"+w.admin+"/metrics"
	}
	time.Sleep(max(3*time.Second, claimIdleOf(t, claimIdle)+time.Second))
	owners, maxDeliveries := pendingOwners(t, rdb, k)
	for o, n := range owners {
		if !strings.HasPrefix(o, victimPrefix) {
			t.Errorf("during the stall consumer %s (not the victim's) took %d entries; want them all kept by the stalled victim", o, n)
		}
	}
	if maxDeliveries != 1 {
		t.Errorf("during the stall an entry was delivered %d times; want 1 (nothing stolen)", maxDeliveries)
	}
	if st := readDB(t, db, it.ID); len(st.orders) != 0 {
		t.Fatalf("during the stall the database has %d orders, want none", len(st.orders))
	}

	victim.kill()
	unlock() // the stall ends as the holder dies: the survivor can write
	took := awaitRows(t, db, it.ID, orders, recoveryTarget+recoverySlack)
	t.Logf("%s killed holding %d acknowledged orders in a stalled transaction: all in the database %v after the kill",
		victimKind, orders, took.Round(time.Millisecond))
	if took > recoveryTarget {
		t.Logf("NOTE: over the %v target (within the %v slack for a busy machine)", recoveryTarget, recoverySlack)
	}

	st := readDB(t, db, it.ID)
	for id, u := range ids {
		if o, ok := st.orders[id]; !ok || o.user != u || o.status != "created" {
			t.Errorf("acknowledged order %s of %s: got %+v (present %v), want created", id, u, o, ok)
		}
	}
	checkSold(t, st)
	if len(st.failures) != 0 {
		t.Errorf("order_failures has %d rows, want none", len(st.failures))
	}
	waitDrained(t, rdb, k, 10*time.Second)
	checkQueueEmpty(t, rdb, k)
	if n := awaitNoMarkers(t, rdb, b.KeyPrefix, 5*time.Second); n != 0 {
		t.Errorf("%d pending-order markers left, want none", n)
	}
	if dead := metric(t, survivorMetrics, `seckill_async_dead_letters_total`); dead != 0 {
		t.Errorf("the survivor dead-lettered %v orders, want none", dead)
	}
	if n := survivor.out.count("took over the entries of a writer whose lease is gone"); n == 0 {
		t.Errorf("the survivor never logged a takeover; want the victim's entries taken over through its lease")
	}
	// The victim's consumers that held entries are gone from the group.
	infos, err := rdb.XInfoConsumers(context.Background(), k.stream(), "writers").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range infos {
		if _, held := owners[c.Name]; held {
			t.Errorf("the victim's consumer %s is still in the group (%d pending)", c.Name, c.Pending)
		}
	}
}

// awaitRows polls until the item has n order rows and returns how long it
// took; the test fails after d.
func awaitRows(t *testing.T, db *sql.DB, itemID int64, n int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var got int
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE item_id = ?", itemID).Scan(&got)
		cancel()
		if err == nil && got >= n {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%d order rows after %v, want %d (%v)", got, d, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockItemRow holds the item's row in a transaction of the test (a stalled
// database for every writer of the item) until the returned func is called.
func lockItemRow(t *testing.T, db *sql.DB, itemID int64) func() {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sold int64
	if err := tx.QueryRow("SELECT sold FROM items WHERE id = ? FOR UPDATE", itemID).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = tx.Rollback()
		}
	}
}

// awaitHeldBy waits until n entries are pending, all owned by consumers
// named with prefix.
func awaitHeldBy(t *testing.T, rdb *redis.Client, k keys, prefix string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		owners, _ := pendingOwners(t, rdb, k)
		held := 0
		for o, c := range owners {
			if strings.HasPrefix(o, prefix) {
				held += c
			}
		}
		if held == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the victim (%s*) holds %d of %d entries: %v", d, prefix, held, n, owners)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pendingOwners counts the pending entries per consumer and returns the
// most deliveries of one entry.
func pendingOwners(t *testing.T, rdb *redis.Client, k keys) (map[string]int, int64) {
	t.Helper()
	pend, err := rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: k.stream(), Group: "writers",
		Start: "-", End: "+", Count: 10000}).Result()
	if err != nil && !strings.HasPrefix(err.Error(), "NOGROUP") {
		t.Fatalf("XPENDING: %v", err)
	}
	owners := map[string]int{}
	var most int64
	for _, p := range pend {
		owners[p.Consumer]++
		most = max(most, p.RetryCount)
	}
	return owners, most
}

func claimIdleOf(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	if d >= 30*time.Second {
		return 0 // the default: the stall is shorter, recovery must not wait for it
	}
	return d
}
