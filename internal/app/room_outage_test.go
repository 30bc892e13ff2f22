//go:build drill

package app_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// Redis down (connections refused) or stalled (accepted, never answered):
// a join and a status poll fail closed with a fast 503, an order with a
// good pass too (its gate is in Redis), and a bad pass is still a 403 (it
// needs no Redis). Once Redis is back, the same user finds the same place.
func TestDrillRoomRedisDownOrStalled(t *testing.T) {
	type fault struct {
		name        string
		start, heal func(*testenv.Proxy)
	}
	cut := fault{"down", (*testenv.Proxy).Cut, (*testenv.Proxy).Restore}
	stall := fault{"stalled", (*testenv.Proxy).Stall, (*testenv.Proxy).Heal}
	// Each case has its own backends, proxy and service, so the three run
	// at once (parallel subtests): a refused or
	// stalled connection costs little CPU.
	type outageCase struct {
		backend string
		fault
	}
	cases := []outageCase{{"embedded", cut}, {"mariadb", cut},
		// The embedded Redis's default bound is 10 s (it has no network
		// to stall); a stall is the real Redis's failure.
		{"mariadb", stall}}
	testenv.EachParallel(t, cases, func(c outageCase) string { return c.backend + "/" + c.name }, func(t *testing.T, oc outageCase) {
		b, f := testenv.Open(t, oc.backend), oc.fault
		u, err := url.Parse(b.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := testenv.NewProxy(t, u.Host)
		c := startRoomApp(t, b, func(cfg *app.Config) {
			pu := *u
			pu.Host = proxy.Addr()
			cfg.RedisURL = pu.String()
			cfg.RedisTimeout = 0 // the production default
		})
		id := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 100})
		ann := joinRoom(t, c, id, "ann")
		annT := awaitTicket(t, c, id, ann.Ticket, "admitted", 5*time.Second)
		ben := joinRoom(t, c, id, "ben")

		f.start(proxy)
		faultAt := time.Now()
		for _, call := range []struct {
			name string
			do   func() (int, string)
		}{
			{"join", func() (int, string) {
				r, _ := c.Do("POST", roomPath(id, "/queue"), map[string]string{"user_id": "cat"}, false, nil)
				return r.Status, r.ErrorCode()
			}},
			{"order with a good pass", func() (int, string) {
				r := orderWithPass(t, c, id, "ann", annT.Pass, "")
				return r.Status, r.ErrorCode()
			}},
		} {
			start := time.Now()
			status, code := call.do()
			if took := time.Since(start); status != http.StatusServiceUnavailable || code != "unavailable" || took > outageBound {
				t.Errorf("%s with redis %s: got %d %s after %v, want 503 unavailable within %v", call.name, f.name, status, code, took, outageBound)
			}
		}
		// A waiting ticket's poll is answered from the admission
		// loop's counters while they are fresh (no pass in it); once
		// the loop can no longer read them, it asks Redis: 503.
		for {
			start := time.Now()
			r, _ := c.Do("GET", roomPath(id, "/queue/"+ben.Ticket), nil, false, nil)
			if took := time.Since(start); took > outageBound {
				t.Errorf("ben's status with redis %s took %v, want within %v", f.name, took, outageBound)
			}
			if r.Status == http.StatusServiceUnavailable && r.ErrorCode() == "unavailable" {
				break
			}
			var tk roomTicket
			if r.Status == http.StatusOK {
				r.JSON(t, &tk)
			}
			if r.Status != http.StatusOK || tk.State != "waiting" || tk.Pass != "" {
				t.Fatalf("ben's status with redis %s: got %d %s, want 200 waiting (from memory) or 503", f.name, r.Status, r.Body)
			}
			if time.Since(faultAt) > outageBound {
				t.Fatalf("ben's status still answered from memory %v into the fault", time.Since(faultAt))
			}
			time.Sleep(20 * time.Millisecond)
		}
		wantError(t, "order without a pass during the fault", orderWithPass(t, c, id, "ben", "", ""), http.StatusForbidden, "pass_required")
		f.heal(proxy)

		deadline := time.Now().Add(10 * time.Second)
		for {
			r, _ := c.Do("POST", roomPath(id, "/queue"), map[string]string{"user_id": "ben"}, false, nil)
			if r.Status == http.StatusOK {
				var tk roomTicket
				r.JSON(t, &tk)
				if tk.Ticket != ben.Ticket {
					t.Errorf("ben after the fault: ticket %d, want %d", tk.Number, ben.Number)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("join after the fault healed: still %d %s", r.Status, r.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// cat's join was answered 503, but a stalled Redis may run it
		// once it answers again: a join is one script, so cat then
		// has one place, which joining again returns.
		cat := joinRoom(t, c, id, "cat")
		if cat.Number != 3 {
			t.Errorf("cat after the fault: ticket %d, want 3", cat.Number)
		}
		if v := roomAdminView(t, c, id); v.Sold != 0 || v.WaitingRoom.Tickets != 3 {
			t.Errorf("after the fault: sold %d tickets %d, want 0 and 3 (one place each)", v.Sold, v.WaitingRoom.Tickets)
		}
	})
}
