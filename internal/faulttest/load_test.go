package faulttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
)

// class is what the client knows after one order attempt.
type class int

const (
	// acked: a 2xx with an order id. The order must end up in the database.
	acked class = iota
	// refused: a definite no (4xx): nothing was admitted by this attempt.
	refused
	// notSent: the connection was refused, so the request never left.
	notSent
	// unknown: the request was sent and the answer lost (connection reset,
	// timeout) or was a 5xx: it may or may not have been admitted.
	unknown
)

func (c class) String() string {
	return [...]string{"acked", "refused", "not_sent", "unknown"}[c]
}

// attempt is one order request and what came of it.
type attempt struct {
	user, key  string
	start, end time.Time
	status     int // 0: no answer
	code       string
	orderID    string
	replayed   bool
	class      class
	err        string
}

// loadConfig shapes a load run.
type loadConfig struct {
	workers     int           // goroutines, each with one request in flight
	maxAttempts int           // bound on requests
	maxTime     time.Duration // bound on the run
	repeatShare float64       // share of new attempts by a user who tried before (fresh key)
	retries     int           // retries, with the same user and key, of an attempt whose outcome is not known
	pause       time.Duration // pause of a worker between its requests (0: closed loop at full speed)
}

// load places orders on one item from real goroutines until stopped, the
// item is sold out, or its bounds are reached, and records every attempt.
type load struct {
	cfg    loadConfig
	cs     []*apptest.Client // worker i sends to cs[i%len(cs)]
	itemID int64
	name   string // user name prefix

	mu       sync.Mutex
	attempts []attempt
	users    []string

	sent    atomic.Int64
	acks    atomic.Int64
	soldOut atomic.Bool
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	done    chan struct{}
}

// startLoad starts cfg.workers goroutines placing orders on itemID, spread
// over the services at bases (the same addresses across a restart).
func startLoad(t *testing.T, bases []string, itemID int64, cfg loadConfig) *load {
	t.Helper()
	l := &load{cfg: cfg, itemID: itemID, name: "f" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, base := range bases {
		c := apptest.NewClient(base, apptest.Token)
		c.HTTP.Timeout = 10 * time.Second
		l.cs = append(l.cs, c)
	}
	for i := range cfg.workers {
		l.wg.Add(1)
		go l.worker(i)
	}
	go func() {
		defer close(l.done)
		l.wg.Wait()
	}()
	timer := time.AfterFunc(cfg.maxTime, l.halt)
	t.Cleanup(func() { timer.Stop(); l.halt(); <-l.done })
	return l
}

func (l *load) halt() { l.once.Do(func() { close(l.stop) }) }

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// sleep pauses d, or less when the load stops.
func (l *load) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
	case <-t.C:
	}
}

func (l *load) worker(i int) {
	defer l.wg.Done()
	c := l.cs[i%len(l.cs)]
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	for !l.stopped() && !l.soldOut.Load() {
		user, key := l.pick(rng)
		for try := 0; ; try++ {
			if l.sent.Add(1) > int64(l.cfg.maxAttempts) {
				l.halt()
				return
			}
			a := l.place(c, user, key)
			l.record(a)
			if a.class == acked {
				l.acks.Add(1)
			}
			if a.code == "sold_out" {
				l.soldOut.Store(true)
			}
			if (a.class != unknown && a.class != notSent) || try >= l.cfg.retries || l.stopped() {
				break
			}
			l.sleep(time.Duration(try+1) * 50 * time.Millisecond) // a client's retry pause, not an assertion
		}
		if l.cfg.pause > 0 {
			l.sleep(l.cfg.pause)
		}
	}
}

// pick chooses a user: mostly a new one, sometimes one who tried before.
func (l *load) pick(rng *rand.Rand) (user, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.users) > 0 && rng.Float64() < l.cfg.repeatShare {
		user = l.users[rng.IntN(len(l.users))]
	} else {
		user = fmt.Sprintf("%s-u%d", l.name, len(l.users))
		l.users = append(l.users, user)
	}
	return user, fmt.Sprintf("%s-k%d", user, rng.Uint64())
}

func (l *load) place(c *apptest.Client, user, key string) attempt {
	a := attempt{user: user, key: key, start: time.Now()}
	r, err := postOrder(c, l.itemID, user, key)
	a.end = time.Now()
	switch {
	case err != nil:
		a.err = err.Error()
		a.class = unknown
		if errors.Is(err, syscall.ECONNREFUSED) {
			a.class = notSent
		}
	case r.Status >= 200 && r.Status < 300:
		a.status = r.Status
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.Body, &o); err != nil || o.ID == "" {
			a.class, a.err = unknown, fmt.Sprintf("2xx without an order id: %q", r.Body)
			break
		}
		a.class, a.orderID, a.replayed = acked, o.ID, r.Header.Get("Idempotent-Replayed") == "true"
	case r.Status >= 500:
		a.status, a.code, a.class = r.Status, r.ErrorCode(), unknown
	default:
		a.status, a.code, a.class = r.Status, r.ErrorCode(), refused
	}
	return a
}

// postOrder sends one order attempt, exactly once. net/http replays a
// request that carries an Idempotency-Key on a fresh connection when a
// reused one breaks, even after the server got it; the replay would hit
// the dead service, fail with "connection refused", and hide that the
// first one was delivered. Without GetBody the transport cannot replay, so
// "connection refused" really means nothing was sent.
func postOrder(c *apptest.Client, itemID int64, user, key string) (apptest.Response, error) {
	body, _ := json.Marshal(map[string]string{"user_id": user})
	req, err := http.NewRequest(http.MethodPost, c.Base+"/api/v1/items/"+strconv.FormatInt(itemID, 10)+"/orders", bytes.NewReader(body))
	if err != nil {
		return apptest.Response{}, err
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return apptest.Response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, err
}

func (l *load) record(a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
}

// waitAcks waits until n attempts were acknowledged; the test fails after d.
func (l *load) waitAcks(t *testing.T, n int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for l.acks.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d orders acknowledged after %v, want %d", l.acks.Load(), d, n)
		}
		select {
		case <-l.done:
			t.Fatalf("load ended with %d orders acknowledged, want %d first", l.acks.Load(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// wait waits until the load ends by itself (sold out or its bounds) and
// returns its attempts; the test fails after d.
func (l *load) wait(t *testing.T, d time.Duration) []attempt {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(d):
		l.halt()
		<-l.done
		t.Errorf("load still running after %v; stopped it", d)
	}
	return l.snapshot()
}

// finish stops the load and returns its attempts.
func (l *load) finish() []attempt {
	l.halt()
	<-l.done
	return l.snapshot()
}

func (l *load) snapshot() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]attempt(nil), l.attempts...)
}

// tally counts attempts by class and by status or error code.
func tally(as []attempt) string {
	byClass := map[class]int{}
	byCode := map[string]int{}
	for _, a := range as {
		byClass[a.class]++
		switch {
		case a.status == 0:
			byCode["transport"]++
		case a.code != "":
			byCode[strconv.Itoa(a.status)+" "+a.code]++
		default:
			byCode[strconv.Itoa(a.status)+map[bool]string{true: " replayed"}[a.replayed]]++
		}
	}
	return fmt.Sprintf("%d attempts: acked %d, refused %d, not sent %d, unknown %d; %v",
		len(as), byClass[acked], byClass[refused], byClass[notSent], byClass[unknown], byCode)
}

// placeAll places one order for each user concurrently (workers at a time)
// and fails the test unless every one is answered 202.
func placeAll(t *testing.T, c *apptest.Client, itemID int64, users []string, workers int) map[string]string {
	t.Helper()
	var (
		mu   sync.Mutex
		ids  = map[string]string{} // order id -> user
		errs []string
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(users)); i = next.Add(1) - 1 {
				u := users[i]
				r, err := c.PlaceOrder(itemID, u, "")
				var o struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				}
				if err == nil {
					err = json.Unmarshal(r.Body, &o)
				}
				mu.Lock()
				if err != nil || r.Status != http.StatusAccepted || o.Status != "pending" || o.ID == "" {
					errs = append(errs, fmt.Sprintf("order of %s: got %d %s %v, want 202 pending", u, r.Status, r.Body, err))
				} else {
					ids[o.ID] = u
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if i == 5 {
			t.Errorf("... and %d more", len(errs)-5)
			break
		}
		t.Error(e)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return ids
}
