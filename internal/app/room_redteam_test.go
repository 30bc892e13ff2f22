package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// A ticket string names its holder's place in one line. When that line is
// gone (the room turned off and on again, or Redis lost it) and its number
// belongs to someone else in the new line, the old string must not show the
// other user's place or pass: it is unknown (404), so its page joins again.
func TestRoomOldTicketDoesNotShowAnotherUsersPass(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100})
		ann := joinRoom(t, c, id, "ann")
		if ann.Number != 1 {
			t.Fatalf("ann's ticket number %d, want 1", ann.Number)
		}
		path := "/api/v1/admin/items/" + itoa(id) + "/waiting-room"
		if r := c.Must(t, "DELETE", path, nil, true, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete room: got %d %s", r.Status, r.Body)
		}
		if r := c.Must(t, "PUT", path, map[string]any{"admit_per_second": 100}, true, nil); r.Status != http.StatusOK {
			t.Fatalf("set room again: got %d %s", r.Status, r.Body)
		}
		ben := joinRoom(t, c, id, "ben")
		if ben.Number != 1 {
			t.Fatalf("ben's ticket number in the new line %d, want 1", ben.Number)
		}
		awaitTicket(t, c, id, ben.Ticket, "admitted", 30*time.Second)
		r := c.Must(t, "GET", roomPath(id, "/queue/"+ann.Ticket), nil, false, nil)
		if r.Status == http.StatusOK {
			var tk roomTicket
			r.JSON(t, &tk)
			t.Fatalf("ann's ticket of the old line reads %s with pass %q (ben's), want 404", tk.State, tk.Pass)
		}
		wantError(t, "ann's ticket of the old line", r, http.StatusNotFound, "not_found")
	})
}

// Strict input on the challenge route: user_id given twice, or a query
// net/url cannot read whole, is 400 (as every query parameter the API
// reads), not a challenge for the first value.
func TestRoomChallengeStrictQuery(t *testing.T) {
	c := startRoomApp(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.RoomPoWBits = 4 })
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100})
	if r := c.Must(t, "GET", roomPath(id, "/queue/challenge?user_id=ann"), nil, false, nil); r.Status != http.StatusOK {
		t.Fatalf("challenge: got %d %s, want 200", r.Status, r.Body)
	}
	for _, q := range []string{"user_id=ann&user_id=ben", "user_id=ann;x=1", "user_id=%zz"} {
		r := c.Must(t, "GET", roomPath(id, "/queue/challenge?"+q), nil, false, nil)
		wantError(t, "challenge ?"+q, r, http.StatusBadRequest, "invalid_request")
	}
}

// Redis loses the item's keys (room and gate) while a pass is out: the room
// comes back from the database (joins 503 at worst, then a new line), the
// old ticket string of ticket 1 does not show the new ticket 1's pass, the
// pass already issued still verifies, nobody is admitted while it lives
// (the rebuilt room does not count it), and nothing oversells.
func TestRoomRedisLosesTheItemsKeys(t *testing.T) {
	// The room rebuilt after the loss holds its admissions for a pass TTL;
	// ann's pass must outlive the steps up to her order.
	const passTTL = 15 * time.Second
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 2, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": int(passTTL / time.Second)})
		ann := joinRoom(t, c, id, "ann")
		annT := awaitTicket(t, c, id, ann.Ticket, "admitted", 30*time.Second)

		rdb := b.Redis(t)
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, fmt.Sprintf("%s:{item:%d}*", b.KeyPrefix, id)).Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("the item's keys: %v %v", keys, err)
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		// The admin view still answers (the settings are the database's),
		// saying the room is being set up until the loop has done it.
		if r := c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", id), nil, true, nil); r.Status != http.StatusOK {
			t.Errorf("admin view right after the loss: got %d %s, want 200", r.Status, r.Body)
		}

		// The same user may take the place again; a new user gets number 1
		// of the new line unless ann's join came first.
		var ben roomTicket
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "ben"}, false, nil)
			if r.Status == http.StatusOK {
				r.JSON(t, &ben)
				break
			}
			if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("join after the loss: got %d %s, want 200 (or 503 for a moment)", r.Status, r.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ben.Number != 1 {
			t.Fatalf("ben's number in the new line %d, want 1", ben.Number)
		}
		r := c.Must(t, "GET", roomPath(id, "/queue/"+ann.Ticket), nil, false, nil)
		wantError(t, "ann's ticket of the lost line", r, http.StatusNotFound, "not_found")

		// ann's pass needs no Redis: it still buys (the gate may need a
		// moment to come back), and only once.
		deadline = time.Now().Add(10 * time.Second)
		for {
			r = orderWithPass(t, c, id, "ann", annT.Pass, "")
			if r.Status == http.StatusCreated || r.Status == http.StatusAccepted {
				break
			}
			if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("ann's order with her pass after the loss: got %d %s", r.Status, r.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r := orderWithPass(t, c, id, "ann", annT.Pass, ""); r.Status < 400 {
			t.Errorf("ann's second order with the same pass: got %d %s, want a refusal", r.Status, r.Body)
		}

		// ben is admitted once ann's pass (issued before the loss) has
		// expired, never while it lives: the rebuilt room counts no live
		// pass, and admitting at once would offer a unit twice (redteam #7).
		benT := awaitTicket(t, c, id, ben.Ticket, "admitted", passTTL+30*time.Second)
		if annT.PassExpiresAt == nil || benT.PassExpiresAt == nil {
			t.Fatalf("passes without an expiry: ann %+v, ben %+v", annT, benT)
		}
		if issued := benT.PassExpiresAt.Add(-passTTL); issued.Before(*annT.PassExpiresAt) {
			t.Errorf("ben's pass issued at %v, before ann's (from the lost room) expired at %v",
				issued.Format(time.StampMilli), annT.PassExpiresAt.Format(time.StampMilli))
		}
		if v := roomAdminView(t, c, id); v.Sold > 2 || v.Sold < 1 {
			t.Errorf("sold %d of 2, want 1", v.Sold)
		}
	})
}

// A pause answered 200 holds on every instance at once: another instance
// that has not yet reloaded the room's settings admits nobody either (the
// flag is in Redis, where admission runs). Unpaused, the line moves.
func TestRoomPauseHoldsOnEveryInstance(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	id := createRoomItem(t, a, 100, map[string]any{"admit_per_second": 100})
	deadline := time.Now().Add(5 * time.Second)
	for { // c knows the room and admits through it
		r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "probe"}, false, nil)
		if r.Status == http.StatusOK {
			var tk roomTicket
			r.JSON(t, &tk)
			awaitTicket(t, c, id, tk.Ticket, "admitted", 5*time.Second)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second instance: join still %d %s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	path := "/api/v1/admin/items/" + itoa(id) + "/waiting-room"
	if r := a.Must(t, "PUT", path, map[string]any{"paused": true}, true, nil); r.Status != http.StatusOK {
		t.Fatalf("pause: got %d %s", r.Status, r.Body)
	}
	ann := joinRoom(t, a, id, "ann")
	// Until c reloads the settings it knows no pause of its own.
	deadline = time.Now().Add(5 * time.Second)
	for {
		if v := roomAdminView(t, c, id); v.WaitingRoom != nil && v.WaitingRoom.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second instance never learned the pause")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := ticketStatus(t, c, id, ann.Ticket); st.State != "waiting" {
		t.Fatalf("ann, joined after the pause: %s, want waiting (an instance admitted while paused)", st.State)
	}
	if r := a.Must(t, "PUT", path, map[string]any{"paused": false}, true, nil); r.Status != http.StatusOK {
		t.Fatalf("unpause: got %d %s", r.Status, r.Body)
	}
	awaitTicket(t, c, id, ann.Ticket, "admitted", 5*time.Second)
}

// A forged, huge or malformed ticket string is a 4xx that needs no Redis:
// with Redis stalled it still answers at once, 404 (never a 503 or a wait).
func TestRoomBadTicketNeedsNoRedis(t *testing.T) {
	b := testenv.Real(t)
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
	proxy.Stall()
	defer proxy.Heal()
	for name, tk := range map[string]string{
		"forged":    "AQFhbm6IETdTQzUwS5LlImf",
		"huge":      strings.Repeat("A", 8000),
		"malformed": "%00%ff" + ann.Ticket,
		"changed":   ann.Ticket[:len(ann.Ticket)-1] + "x",
	} {
		// A call that reached the stalled Redis would end in a 503 (its
		// timeout); a 4xx says the ticket was refused without it.
		start := time.Now()
		r, _ := c.Do("GET", roomPath(id, "/queue/"+tk), nil, false, nil)
		if r.Status/100 != 4 {
			t.Errorf("%s ticket with redis stalled: got %d %s, want a 4xx", name, r.Status, r.Body)
		}
		t.Logf("%s ticket with redis stalled: %d in %v", name, r.Status, time.Since(start))
	}
}

// A pass buys once: a second order with it, a retry under another key, and
// an order after its order was cancelled are all refused (the cancelled
// order is still the user's one order), and the cancelled unit goes to the
// next in line, not back to the pass.
func TestRoomPassBuysOnceEvenAfterCancel(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 1, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 600})
		ann := awaitTicket(t, c, id, joinRoom(t, c, id, "ann").Ticket, "admitted", 5*time.Second)
		ben := joinRoom(t, c, id, "ben")
		r := orderWithPass(t, c, id, "ann", ann.Pass, "k1")
		if r.Status != http.StatusCreated {
			t.Fatalf("ann's order: got %d %s", r.Status, r.Body)
		}
		var o struct {
			ID string `json:"id"`
		}
		r.JSON(t, &o)
		wantError(t, "second order, same pass, another key", orderWithPass(t, c, id, "ann", ann.Pass, "k2"), http.StatusConflict, "already_purchased")
		if r, _ := c.SettleOrder(o.ID, "cancel", map[string]string{"user_id": "ann"}, nil); r.Status != http.StatusOK {
			t.Fatalf("cancel: got %d %s", r.Status, r.Body)
		}
		wantError(t, "order after the cancel, same pass", orderWithPass(t, c, id, "ann", ann.Pass, ""), http.StatusConflict, "already_purchased")
		benT := awaitTicket(t, c, id, ben.Ticket, "admitted", 5*time.Second)
		if r := orderWithPass(t, c, id, "ben", benT.Pass, ""); r.Status != http.StatusCreated {
			t.Fatalf("ben's order for the unit ann cancelled: got %d %s", r.Status, r.Body)
		}
		if v := roomAdminView(t, c, id); v.Sold != 1 {
			t.Errorf("sold %d, want 1 (ben's)", v.Sold)
		}
	})
}

// A lowered admission rate holds on every instance at once: one that has
// not reloaded the settings yet admits at the new rate too. Checked from
// Redis: each live pass's score is its admission time plus the pass TTL,
// so no second of the clock may hold two admissions at 1 a second.
func TestRoomLoweredRateHoldsOnEveryInstance(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	const ttl = 60
	id := createRoomItem(t, a, 100, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": ttl})
	deadline := time.Now().Add(5 * time.Second)
	for { // c knows the room and admits through it
		r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "probe"}, false, nil)
		if r.Status == http.StatusOK {
			var tk roomTicket
			r.JSON(t, &tk)
			awaitTicket(t, c, id, tk.Ticket, "admitted", 5*time.Second)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second instance: join still %d %s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	path := "/api/v1/admin/items/" + itoa(id) + "/waiting-room"
	if r := a.Must(t, "PUT", path, map[string]any{"admit_per_second": 1}, true, nil); r.Status != http.StatusOK {
		t.Fatalf("lower the rate: got %d %s", r.Status, r.Body)
	}
	var numbers []string
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		numbers = append(numbers, fmt.Sprint(joinRoom(t, a, id, u).Number))
	}
	// c learns the new rate; from then on it admits at 1 a second anyway.
	deadline = time.Now().Add(5 * time.Second)
	for {
		if v := roomAdminView(t, c, id); v.WaitingRoom != nil && v.WaitingRoom.AdmitPerSecond == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second instance never learned the new rate")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rdb := b.Redis(t)
	live := fmt.Sprintf("%s:{item:%d}:room:live", b.KeyPrefix, id)
	perSecond := map[int64]int{}
	for _, n := range numbers {
		score, err := rdb.ZScore(context.Background(), live, n).Result()
		if err != nil {
			continue // not admitted yet
		}
		perSecond[(int64(score)-ttl*1000)/1000]++
	}
	for sec, n := range perSecond {
		if n > 1 {
			t.Errorf("second %d: %d admissions after the rate went down to 1 a second (%v)", sec, n, perSecond)
		}
	}
}
