package faulttest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testenv"
)

const dbOutage = 10 * time.Second

// The database unreachable for 10 s in the middle of a lua-async sale.
// Admission needs only Redis (the item is cached), so orders are still
// acknowledged and queue up; /readyz says 503; the writers keep retrying;
// once the database is back every acknowledged order is written.
func TestDatabaseOutageDuringLoad(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	be := realBackends(b)
	rdb := redisClient(t, b.RedisURL)
	db := openDB(t, b.MySQLDSN)
	dsn, err := gomysql.ParseDSN(b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	svc := startService(t, "service", "", be, map[string]string{"SECKILL_MYSQL_DSN": dsn.FormatDSN()})
	it := svc.c.CreateItem(t, 3000, "lua-async")
	k := keys{prefix: b.KeyPrefix, item: it.ID}

	// About 150 attempts a second: the sale lasts through the outage.
	l := startLoad(t, []string{"http://" + svc.addr}, it.ID, loadConfig{workers: 16, pause: 100 * time.Millisecond,
		maxAttempts: 10000, maxTime: 35 * time.Second, repeatShare: 0.1, retries: 3})
	l.waitAcks(t, 100, 15*time.Second)

	proxy.Cut()
	cutAt := time.Now()
	if code, _ := awaitStatus(t, svc.c.Base+"/readyz", "", http.StatusServiceUnavailable, 5*time.Second); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the database outage: got %d, want 503", code)
	}
	// Watch the backlog grow in Redis while the outage lasts.
	var maxQueued int64
	for time.Since(cutAt) < dbOutage {
		if q := readQueue(t, rdb, k); q.length > maxQueued {
			maxQueued = q.length
		}
		time.Sleep(200 * time.Millisecond)
	}
	acksBeforeRestore := l.acks.Load()
	proxy.Restore()
	restoredAt := time.Now()

	// The backlog as the service shows it, once it can read the item again.
	code, body := awaitStatus(t, svc.c.Base+"/api/v1/admin/items/"+strconv.FormatInt(it.ID, 10), svc.c.Token, http.StatusOK, 15*time.Second)
	var view struct {
		Queue *struct {
			Queued      int64 `json:"queued"`
			DeadLetters int64 `json:"dead_letters"`
			OldestAgeMS int64 `json:"oldest_age_ms"`
		} `json:"queue"`
	}
	switch {
	case code != http.StatusOK || json.Unmarshal(body, &view) != nil || view.Queue == nil:
		t.Errorf("admin item after the outage: got %d %s, want 200 with a queue", code, body)
	case view.Queue.Queued == 0 || view.Queue.DeadLetters != 0:
		// Read within milliseconds of Restore, while the writers are still
		// backing off and the load goes on: the outage's orders are queued.
		t.Errorf("admin item after the outage: queue %+v, want the backlog queued and no dead letters", *view.Queue)
	default:
		t.Logf("admin item view %v after Restore: queue %+v", time.Since(restoredAt).Round(time.Millisecond), *view.Queue)
	}
	// /readyz shows the backlog when it can read it within its 1 s budget:
	// right after the outage, on a busy machine, one read can miss it (it
	// says "ok" without the queue, and logs why), so ask again for a while.
	var ready struct {
		Queue *struct {
			Queued int64 `json:"queued"`
		} `json:"queue"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body = awaitStatus(t, svc.c.Base+"/readyz", "", http.StatusOK, 10*time.Second)
		ready.Queue = nil
		if code == http.StatusOK && json.Unmarshal(body, &ready) == nil && ready.Queue != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("/readyz after the outage: got %d %s, want 200 with the queue", code, body)
			break
		}
	}
	l.waitAcks(t, acksBeforeRestore+100, 15*time.Second)
	as := l.finish()
	took := waitDrained(t, rdb, k, 30*time.Second)

	var during []attempt
	for _, a := range as {
		if a.start.After(cutAt) && a.end.Before(restoredAt) {
			during = append(during, a)
		}
	}
	t.Logf("load: %s", tally(as))
	t.Logf("during the %v outage: %s; most queued in Redis: %d", dbOutage, tally(during), maxQueued)
	t.Logf("drained %v after the load ended", took.Round(time.Millisecond))
	// Admission needs only Redis: during the outage every attempt gets a
	// definite answer (202, or 409 for a repeat buyer), never a 503.
	ackedDuring, uncertain := 0, 0
	for _, a := range during {
		switch a.class {
		case acked:
			ackedDuring++
		case unknown, notSent:
			uncertain++
		}
	}
	if ackedDuring == 0 || maxQueued == 0 || uncertain != 0 {
		t.Errorf("during the outage: %d orders acknowledged, at most %d queued, %d attempts without a definite answer; want admission to go on without the database",
			ackedDuring, maxQueued, uncertain)
	}

	st := readDB(t, db, it.ID)
	checkAcked(t, as, st, nil)
	checkSold(t, st)
	checkOneOrderPerUser(t, as, nil)
	unacked := checkUnackedRows(t, as, st)
	if len(st.failures) != 0 {
		t.Errorf("order_failures has %d rows; want none (Redis lost nothing)", len(st.failures))
	}
	checkQueueEmpty(t, rdb, k)
	checkGate(t, rdb, k, st)
	m := "http://" + svc.addr + "/metrics"
	dead := metric(t, m, `seckill_async_dead_letters_total`)
	outage := metric(t, m, `seckill_async_write_failures_total{kind="outage"}`)
	other := metric(t, m, `seckill_async_write_failures_total{kind="error"}`)
	t.Logf("database: sold %d of %d, %d orders (%d never acknowledged); writers: %v failed attempts as outage, %v as error, %v dead-lettered",
		st.sold, st.stock, len(st.orders), unacked, outage, other, dead)
	if dead != 0 {
		t.Errorf("writers dead-lettered %v orders because of a database outage; want them retried until it ends", dead)
	}
	if outage == 0 {
		t.Errorf("writers recorded no failed attempt during a %v database outage; want retries counted as outage", dbOutage)
	}
}

// awaitStatus polls url (with the admin token when not empty) until it
// answers want or d passes, and returns the last answer (0: none).
func awaitStatus(t *testing.T, url, token string, want int, d time.Duration) (int, []byte) {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(d)
	code, body := 0, []byte(nil)
	for {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if resp, err := hc.Do(req); err == nil {
			body = readAll(resp)
			code = resp.StatusCode
		}
		if code == want || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b
}
