package faulttest

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// The service (API and writers in one process) killed with SIGKILL in the
// middle of a sale, then restarted on the same port, database and prefix.
func TestServiceKilledDuringLoad(t *testing.T) {
	t.Parallel()
	killDuringLoad(t, 1, false)
}

// The same with two services and a worker sharing the sale: one service
// is killed and restarted while the other and the worker go on.
func TestServiceKilledDuringLoadMultiInstance(t *testing.T) {
	t.Parallel()
	killDuringLoad(t, 2, true)
}

const (
	killStock    = 2000
	killAfterAck = 500 // acknowledged orders before the kill
)

func killDuringLoad(t *testing.T, services int, withWorker bool) {
	b := testenv.Real(t)
	be := realBackends(b)
	rdb := redisClient(t, b.RedisURL)
	db := openDB(t, b.MySQLDSN)

	svcs := make([]*service, services)
	bases := make([]string, services)
	for i := range svcs {
		svcs[i] = startService(t, "service-"+string(rune('a'+i)), "", be, nil)
		bases[i] = "http://" + svcs[i].addr
	}
	var w *worker
	if withWorker {
		w = startWorker(t, "worker", be, nil, true)
	}
	it := svcs[0].c.CreateItem(t, killStock, "lua-async")
	k := keys{prefix: b.KeyPrefix, item: it.ID}

	l := startLoad(t, bases, it.ID, loadConfig{workers: 32, maxAttempts: 4 * killStock, maxTime: 30 * time.Second,
		repeatShare: 0.1, retries: 3})
	l.waitAcks(t, killAfterAck, 20*time.Second)
	victim := svcs[0]
	victim.kill()
	killedAt := time.Now()
	if !killedBySIGKILL(victim.cmd.ProcessState) {
		t.Fatalf("%s ended with %v, want killed by SIGKILL", victim.name, victim.cmd.ProcessState)
	}
	acksAtKill := l.acks.Load()
	restarted := startService(t, victim.name+"-restarted", victim.addr, be, nil)
	t.Logf("killed %s after %d acknowledged orders; it answered again %v later",
		victim.name, acksAtKill, time.Since(killedAt).Round(time.Millisecond))

	as := l.wait(t, 30*time.Second)
	t.Logf("load: %s", tally(as))
	if !l.soldOut.Load() {
		t.Errorf("the load ended (%d attempts) without a sold_out answer; want the %d units sold", len(as), killStock)
	}
	took := waitDrained(t, rdb, k, 30*time.Second)
	t.Logf("drained %v after the load ended", took.Round(time.Millisecond))

	st := readDB(t, db, it.ID)
	checkAcked(t, as, st, nil)
	checkSold(t, st)
	checkOneOrderPerUser(t, as, nil)
	unacked := checkUnackedRows(t, as, st)
	if len(st.failures) != 0 {
		t.Errorf("order_failures has %d rows; want none: Redis lost nothing, so the database must take every admitted order", len(st.failures))
	}
	if l.soldOut.Load() && st.sold != st.stock {
		t.Errorf("the gate answered sold_out but the database sold %d of %d: units lost", st.sold, st.stock)
	}
	checkQueueEmpty(t, rdb, k)
	checkGate(t, rdb, k, st)
	t.Logf("database: sold %d of %d, %d orders (%d never acknowledged to a client), %d users",
		st.sold, st.stock, len(st.orders), unacked, len(st.byUser))
	logPersisted(t, restarted.name, "http://"+restarted.addr+"/metrics", restarted.proc)
	if w != nil {
		logPersisted(t, w.name, "http://"+w.admin+"/metrics", w.proc)
	}
}

// logPersisted logs what a process's writers did: the orders they wrote,
// found already written (redeliveries of a killed writer's entries) or
// recorded as failed, and how often they took over a stopped writer's
// entries (through its lease, or after ClaimIdle).
func logPersisted(t *testing.T, name, metricsURL string, p *proc) {
	t.Helper()
	t.Logf("%s: written %v, already %v, failed %v; took over a dead writer's entries %d times (lease), claimed idle ones %d times (ClaimIdle)", name,
		metric(t, metricsURL, `seckill_async_orders_persisted_total{outcome="written"}`),
		metric(t, metricsURL, `seckill_async_orders_persisted_total{outcome="already"}`),
		metric(t, metricsURL, `seckill_async_orders_persisted_total{outcome="failed"}`),
		p.out.count("took over the entries of a writer whose lease is gone"),
		p.out.count("claimed entries of a writer that stopped"))
}
