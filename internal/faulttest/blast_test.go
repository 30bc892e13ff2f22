//go:build drill

package faulttest

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// The blast radius of one master's failover (issue 23). A Redis Cluster of
// three masters with a replica each, run as the repo runs it
// (cluster-require-full-coverage no: scripts/redis-cluster.sh); two items
// on every master, each ordered by two clients at once, new users each
// time, with the per-user limit on (its keys live on every master); the
// master of two of the items is killed (SIGKILL) and its replica promoted.
//
// What holds, for every strategy:
//   - the items on the two healthy masters are answered as if nothing
//     happened: no answer but a 2xx, and none slow (the bound, 1 s, is
//     generous: on main at 2e08f42 they were held about 4 s; the test logs
//     the slowest, 200 ms or less on a quiet machine, see docs/SCALING.md);
//   - the dead master's items are answered within 2 s (a 503 while their
//     slots have no master, not a hang: the request timeout is 3 s), and sell again soon
//     after the promotion: no 503 to an attempt started 1.5 s after it.
//
// It bounds latencies, so it is a drill (make drill): one strategy after
// the other, on an otherwise idle machine.
func TestDrillFailoverBlastRadius(t *testing.T) {
	for _, strategy := range []string{"lua", "lua-async", "lock"} {
		t.Run(strategy, func(t *testing.T) { failoverBlast(t, strategy) })
	}
}

// blastTry is one order attempt of the blast.
type blastTry struct {
	start, end time.Time
	status     int // 0: no answer
}

// failoverBlast runs the blast on strategy.
func failoverBlast(t *testing.T, strategy string) {
	const (
		healthyBound = time.Second
		// The dead master's items: an answer (a 503 while the slots have
		// no master) well before the request timeout (3 s) and the 4 s
		// freeze this test was written against. 1.5 s held on a quiet
		// machine.
		deadBound    = 2 * time.Second
		servingAgain = 1500 * time.Millisecond
	)
	cluster := testenv.StartCluster(t, 3, 1, "--cluster-require-full-coverage", "no")
	b := testenv.Real(t)
	be := backends{redisURL: cluster.URL(), dsn: b.MySQLDSN, prefix: b.KeyPrefix}
	rdb := testenv.Backend{RedisURL: cluster.URL(), RedisMode: testenv.ModeCluster}.Universal(t)
	cc := rdb.(*redis.ClusterClient)
	svc := startService(t, "service", "", be, map[string]string{"SECKILL_REDIS_MODE": "cluster",
		"SECKILL_REQUEST_TIMEOUT": "3s", "SECKILL_RATE_USER": "10/s"})
	ctx := context.Background()

	// Two items on each master.
	where := map[int64]string{}
	perMaster := map[string]int{}
	var items []int64
	for tries := 0; len(items) < 6; tries++ {
		if tries == 60 {
			t.Fatalf("60 items made, %v per master: want two on each of three", perMaster)
		}
		it := svc.c.CreateItem(t, 1_000_000, strategy)
		m, err := cc.MasterForKey(ctx, keys{prefix: b.KeyPrefix, item: it.ID}.meta())
		if err != nil {
			t.Fatalf("master of item %d: %v", it.ID, err)
		}
		addr := m.Options().Addr
		if perMaster[addr] < 2 {
			perMaster[addr]++
			where[it.ID] = addr
			items = append(items, it.ID)
		}
	}
	victimAddr := where[items[0]]
	var victim *testenv.RedisServer
	for _, n := range cluster.Nodes {
		if n.Addr() == victimAddr {
			victim = n
		}
	}
	replica := cluster.ReplicaOf(victimAddr)
	if victim == nil || replica == nil {
		t.Fatalf("master %s of item %d: node %v, replica %v; want both", victimAddr, items[0], victim, replica)
	}

	var mu sync.Mutex
	tries := map[int64][]blastTry{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range items {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					a := blastTry{start: time.Now()}
					r, err := postOrder(svc.c, id, fmt.Sprintf("blast-%d-%d-%d", id, w, n), "")
					a.end = time.Now()
					if err == nil {
						a.status = r.Status
					}
					mu.Lock()
					tries[id] = append(tries[id], a)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// Every item sells before the kill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		ok := true
		for _, id := range items {
			n := 0
			for _, a := range tries[id] {
				if a.status/100 == 2 {
					n++
				}
			}
			ok = ok && n >= 20
		}
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every item sold 20 orders within 30s before the kill")
		}
		time.Sleep(50 * time.Millisecond)
	}

	victim.Kill()
	killedAt := time.Now()
	for replica.Role() != "master" {
		if time.Since(killedAt) > 30*time.Second {
			t.Fatalf("replica %s of the killed master not promoted after 30s", replica.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	promotedAt := time.Now()
	time.Sleep(servingAgain + 700*time.Millisecond) // attempts after servingAgain: 12 workers, one every ~20 ms each
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	t.Logf("%s: killed master %s; replica %s promoted %v after the kill", strategy, victimAddr, replica.Addr(),
		promotedAt.Sub(killedAt).Round(time.Millisecond))

	for _, id := range items {
		dead := where[id] == victimAddr
		var during []blastTry // answered after the kill
		for _, a := range tries[id] {
			if a.end.After(killedAt) {
				during = append(during, a)
			}
		}
		statuses := map[int]int{}
		slowest := time.Duration(0)
		lastRefusal := "none"
		late := 0 // attempts the servingAgain rule judges
		for _, a := range during {
			if a.start.After(promotedAt.Add(servingAgain)) {
				late++
			}
			statuses[a.status]++
			took := a.end.Sub(a.start)
			slowest = max(slowest, took)
			if a.status/100 != 2 {
				lastRefusal = fmt.Sprintf("%d started %v after the promotion", a.status, a.start.Sub(promotedAt).Round(time.Millisecond))
			}
			switch {
			case !dead && a.status/100 != 2:
				t.Errorf("item %d on healthy master %s: answered %d (after %v), want 2xx: the failover of %s reached it",
					id, where[id], a.status, took.Round(time.Millisecond), victimAddr)
			case !dead && took > healthyBound:
				t.Errorf("item %d on healthy master %s: an answer took %v, want at most %v", id, where[id], took, healthyBound)
			case dead && took > deadBound:
				t.Errorf("item %d on the dead master: an answer (%d) took %v, want at most %v", id, a.status, took, deadBound)
			case dead && a.status/100 != 2 && a.start.After(promotedAt.Add(servingAgain)):
				t.Errorf("item %d on the dead master: answered %d to an attempt started %v after the promotion, want 2xx by %v",
					id, a.status, a.start.Sub(promotedAt).Round(time.Millisecond), servingAgain)
			}
		}
		tag := "healthy master"
		if dead {
			tag = "DEAD master"
		}
		t.Logf("item %d on %s (%s), after the kill: %s; slowest %v; last refusal: %s",
			id, where[id], tag, statusTally(statuses), slowest.Round(time.Millisecond), lastRefusal)
		if dead && late == 0 {
			t.Errorf("item %d on the dead master: no attempt started %v after the promotion, so none was judged", id, servingAgain)
		}
		if dead && statuses[http.StatusCreated]+statuses[http.StatusAccepted] == 0 {
			t.Errorf("item %d on the dead master: no order sold after the kill, want the sale to go on after the promotion", id)
		}
	}
	if v := metric(t, "http://"+svc.addr+"/metrics", `seckill_rate_limit_failed_open_total{limit="user"}`); v == 0 {
		t.Logf("the per-user limit never failed open (no limit key of an attempt in flight lived on the dead master)")
	} else {
		t.Logf("the per-user limit failed open %v times", v)
	}
}

func statusTally(m map[int]int) string {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d x%d", c, m[c]))
	}
	return strings.Join(parts, ", ")
}
