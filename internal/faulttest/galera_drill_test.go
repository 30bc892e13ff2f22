//go:build drill

package faulttest

import (
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// galeraFailoverBound is the target for the first 2xx after the write
// node is SIGKILLed: HAProxy's check runs every second and a standby takes
// the writes once the writer missed two probes (scripts/galera.sh), so
// about 2-3 s, with slack for a loaded machine.
const galeraFailoverBound = 5 * time.Second

// galeraPath is scripts/galera.sh of this module.
func galeraPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "galera.sh")
}

// galeraScript runs scripts/galera.sh with args and returns its output.
//
// The question of which node takes the writes (primary: the server
// HAProxy has up) is asked again for up to 30 s: between a fault and the
// next election by HAProxy's checks no node is up. What the test does to
// the cluster (kill, stall, restart) runs once.
func galeraScript(t *testing.T, args ...string) string {
	t.Helper()
	retry := len(args) == 1 && args[0] == "primary"
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(galeraPath(), args...).CombinedOutput()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
		if !retry || time.Now().After(deadline) {
			t.Fatalf("galera.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// galeraStatus is scripts/galera.sh status, for a failure's message: each
// node's state and HAProxy's view, read on the nodes' own sockets.
func galeraStatus() string {
	out, err := exec.Command(galeraPath(), "status").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(galera.sh status: %v)", out, err)
	}
	return string(out)
}

// TestDrillGaleraWriterKilled: a sale on each strategy, with one service
// instance and with three, through HAProxy to
// the three-node Galera cluster of scripts/galera.sh, with the node taking
// the writes SIGKILLed mid-sale. Then: every 201 and acknowledged 202 is
// on every surviving node; no oversell, one order per user, Redis and the
// database agree; the answers are only 2xx and 503 while HAProxy moves the
// writes, and 2xx again within galeraFailoverBound of the kill; the
// killed node rejoins (by IST) while the sale goes on and holds the same
// rows as the others.
func TestDrillGaleraWriterKilled(t *testing.T) {
	for _, strategy := range drillStrategies {
		for _, instances := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d_instances", strategy, instances), func(t *testing.T) {
				drillGaleraWriter(t, galeraSale{strategy, instances, 1}, galeraKill)
			})
		}
	}
	// An item of four buckets: lua sells on four bucket rows (moving
	// units between them, each move a transaction Galera certifies),
	// lua-async on four Redis streams whose writers wait the failover out.
	for _, strategy := range []string{"lua", "lua-async"} {
		t.Run(strategy+"/4_buckets", func(t *testing.T) {
			drillGaleraWriter(t, galeraSale{strategy, 1, 4}, galeraKill)
		})
	}
}

// galeraSale is what a Galera drill sells: an item of buckets on
// strategy, through instances service processes.
type galeraSale struct {
	strategy           string
	instances, buckets int
}

// TestDrillGaleraWriterStalled: the same, through one instance and three,
// with the write node frozen
// (SIGSTOP: its connections stay open, nothing answers) instead of
// killed, and resumed once the writes moved: the others evict it, it
// rejoins by itself (IST) and must end with the same rows.
func TestDrillGaleraWriterStalled(t *testing.T) {
	for _, strategy := range drillStrategies {
		for _, instances := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d_instances", strategy, instances), func(t *testing.T) {
				drillGaleraWriter(t, galeraSale{strategy, instances, 1}, galeraStall)
			})
		}
	}
}

// TestDrillGaleraWriterCut: the same, through one instance and three,
// with the network to the write node
// cut (HAProxy reaches it, its health checks included, through the fault
// proxy, which closes every connection and refuses new ones) and restored
// once the writes moved. The node itself stays in the cluster: only its
// clients lose it, COMMITs in flight included.
func TestDrillGaleraWriterCut(t *testing.T) {
	for _, strategy := range drillStrategies {
		for _, instances := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d_instances", strategy, instances), func(t *testing.T) {
				drillGaleraWriter(t, galeraSale{strategy, instances, 1}, galeraCut)
			})
		}
	}
}

// galeraFault is how a drill takes the write node (node N) out, and how
// it brings it back; prepare, when set, runs before the sale.
type galeraFault struct {
	name      string
	prepare   func(t *testing.T, n string)
	out, back func(t *testing.T, n string)
}

var (
	galeraKill = galeraFault{name: "killing",
		out:  func(t *testing.T, n string) { t.Log(galeraScript(t, "kill", n)) },
		back: func(t *testing.T, n string) { t.Log(galeraScript(t, "restart", n)) }}
	galeraStall = galeraFault{name: "stalling",
		out:  func(t *testing.T, n string) { t.Log(galeraScript(t, "stall", n)) },
		back: func(t *testing.T, n string) { t.Log(galeraScript(t, "resume", n)) }}
	galeraCut = func() galeraFault {
		var proxy *testenv.Proxy
		return galeraFault{name: "cutting",
			prepare: func(t *testing.T, n string) {
				proxy = testenv.NewProxy(t, "127.0.0.1:"+strconv.Itoa(3310+int(n[0]-'0')))
				_, port, _ := strings.Cut(proxy.Addr(), ":")
				t.Log(galeraScript(t, "via", n, port))
				t.Cleanup(func() { t.Log(galeraScript(t, "via", n)) }) // before the proxy's own cut
			},
			out:  func(t *testing.T, n string) { proxy.Cut(); t.Logf("the network to node%s cut", n) },
			back: func(t *testing.T, n string) { proxy.Restore(); t.Logf("the network to node%s restored", n) }}
	}()
)

// galeraWhole waits until all three nodes are Synced in one primary
// component of three.
func galeraWhole(t *testing.T, d time.Duration) {
	t.Helper()
	var status string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if status = galeraScript(t, "status"); strings.Count(status, ": 3 Primary Synced") == 3 {
			return
		}
	}
	t.Fatalf("the cluster is not whole %v after the node came back:\n%s", d, status)
}

// drillGaleraWriter is one case of the Galera drills: sale, the write
// node taken out by fault.
func drillGaleraWriter(t *testing.T, sale galeraSale, fault galeraFault) {
	strategy, instances := sale.strategy, sale.instances
	g := testenv.Galera(t)
	writer := galeraScript(t, "primary")
	n := strings.TrimPrefix(writer, "node")
	if fault.prepare != nil {
		fault.prepare(t, n)
	}
	b := testenv.Real(t) // Redis, and the test's key prefix
	be := backends{redisURL: b.RedisURL, dsn: g.DSN, prefix: b.KeyPrefix}
	var bases []string
	var svc *service
	for i := range instances {
		s := startService(t, fmt.Sprintf("seckill-%d", i+1), "", be, drillEnv())
		bases = append(bases, "http://"+s.addr)
		if svc == nil {
			svc = s
		}
	}
	it := svc.c.CreateBucketedItem(t, 1000000, strategy, sale.buckets)
	// New users only: every definite answer is a 2xx (no repeat
	// buyer's 409, and far from sold out).
	l := startLoad(t, bases, it.ID, loadConfig{workers: 16, pause: 20 * time.Millisecond,
		maxAttempts: 1000000, maxTime: 3 * time.Minute})
	l.waitAcks(t, 100, 30*time.Second)

	if now := galeraScript(t, "primary"); now != writer {
		t.Fatalf("the writes moved from %s to %s before the fault", writer, now)
	}
	fault.out(t, n)
	killedAt := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			fault.back(t, n)
			galeraWhole(t, time.Minute)
		}
	})

	// The first 2xx of a request sent after the kill.
	var firstAfter time.Time
	for deadline := killedAt.Add(30 * time.Second); firstAfter.IsZero() && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, a := range l.snapshot() {
			if a.class == acked && a.start.After(killedAt) && (firstAfter.IsZero() || a.end.Before(firstAfter)) {
				firstAfter = a.end
			}
		}
	}
	if firstAfter.IsZero() {
		t.Fatalf("no 2xx within 30 s of %s %s; the cluster now:\n%s", fault.name, writer, galeraStatus())
	}
	// The writes moved (lua-async's 202s come from Redis before they do).
	var now string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, err := exec.Command(galeraPath(), "primary").Output(); err == nil && strings.TrimSpace(string(out)) != writer {
			now = strings.TrimSpace(string(out))
			break
		}
	}
	if now == "" {
		t.Fatalf("HAProxy still sends the writes to %s 30 s after %s it", writer, fault.name)
	}
	t.Logf("writes on %s %v after %s %s", now, time.Since(killedAt).Round(100*time.Millisecond), fault.name, writer)
	acks := l.acks.Load()
	// The node rejoins while the sale goes on.
	fault.back(t, n)
	restarted = true
	galeraWhole(t, time.Minute)
	l.waitAcks(t, acks+100, 30*time.Second)
	as := l.finish()
	ks := bucketKeys(b.KeyPrefix, it.ID, sale.buckets)
	rdb := redisClient(t, b.RedisURL)
	if strategy == "lua-async" {
		for _, k := range ks {
			waitDrained(t, rdb, k, 30*time.Second)
		}
	}

	// The window, and the answers while HAProxy moved the writes.
	var lastBefore time.Time
	var during []attempt
	bad := map[string]int{}
	for _, a := range as {
		if a.class == acked && a.end.Before(killedAt) && a.end.After(lastBefore) {
			lastBefore = a.end
		}
		if a.end.After(killedAt) && a.start.Before(firstAfter) {
			during = append(during, a)
		}
		if !(a.status >= 200 && a.status < 300) && a.status != 503 {
			bad[fmt.Sprintf("%d %s %s", a.status, a.code, a.err)]++
		}
	}
	window := firstAfter.Sub(lastBefore)
	t.Logf("%s %s; writes on %s at the end; last 2xx %v before the fault, first 2xx %v after it (window %v)",
		fault.name, writer, galeraScript(t, "primary"), killedAt.Sub(lastBefore).Round(time.Millisecond),
		firstAfter.Sub(killedAt).Round(time.Millisecond), window.Round(time.Millisecond))
	t.Logf("during the window: %s", tally(during))
	t.Logf("load: %s", tally(as))
	if len(bad) != 0 {
		shown := make([]string, 0, len(bad))
		for s, c := range bad {
			shown = append(shown, fmt.Sprintf("%dx %q", c, s))
		}
		sort.Strings(shown)
		t.Errorf("answers other than 2xx and 503: %v", shown)
	}
	// A lua-async order is acknowledged (202) from Redis alone: its
	// buyers see no window, its writers wait the failover out.
	if d := firstAfter.Sub(killedAt); d > galeraFailoverBound && strategy != "lua-async" {
		t.Errorf("first 2xx %v after the kill, want within %v", d.Round(time.Millisecond), galeraFailoverBound)
	}

	// A COMMIT the fault cut was answered 503 with its outcome unknown:
	// the instance that took it reads it back in the background and hands
	// the unit back once the order is surely not there (twice "not
	// there", a second apart). Wait for those to settle: the gate's units
	// taken equal to what the database sold.
	if strategy != "lock" {
		awaitGateSettled(t, rdb, ks, openDB(t, g.NodeDSNs[0]), it.ID, time.Minute)
	}

	// Every node, the rejoined one included, holds every
	// acknowledged order and the same rows.
	var first dbState
	for i, dsn := range g.NodeDSNs {
		st := readDB(t, openDB(t, dsn), it.ID)
		checkAcked(t, as, st, nil)
		checkSold(t, st)
		checkOneOrderPerUser(t, as, nil)
		if i == 0 {
			first = st
			checkUnackedRows(t, as, st)
			if strategy != "lock" {
				checkGateBuckets(t, rdb, ks, st)
			}
			continue
		}
		if st.sold != first.sold || len(st.orders) != len(first.orders) {
			t.Errorf("node %d: sold %d, %d orders; node 1: sold %d, %d orders (the nodes diverged)", i+1, st.sold, len(st.orders), first.sold, len(first.orders))
		}
		for id := range first.orders {
			if _, ok := st.orders[id]; !ok {
				t.Errorf("node %d lacks order %s that node 1 holds", i+1, id)
				break
			}
		}
	}
	t.Logf("database: sold %d, %d orders, %d order_failures", first.sold, len(first.orders), len(first.failures))
}

// awaitGateSettled waits, up to d, until the gate's units taken over ks
// equal the units the database on db sold of item: the background
// read-backs of cut COMMITs are done. The checks that follow say what
// differs if they never are.
func awaitGateSettled(t *testing.T, rdb redis.UniversalClient, ks []keys, db *sql.DB, item int64, d time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		taken := gateTaken(t, rdb, ks)
		st := readDB(t, db, item)
		if taken == st.sold {
			if waited := time.Since(start); waited > time.Second {
				t.Logf("the gate settled %v after the load: taken %d, sold %d", waited.Round(100*time.Millisecond), taken, st.sold)
			}
			return
		}
		if time.Since(start) > d {
			t.Logf("the gate has not settled %v after the load: taken %d, sold %d", d, taken, st.sold)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
