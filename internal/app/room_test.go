package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// A roomed item, end to end: one place per user; every bad pass is a 403
// with its own code that changes nothing; the admitted user's pass buys
// one order and reads used after; a keyed retry replays even with a pass
// expired since. On a Redis Cluster too: a room's keys share its item's slot.
func TestRoomPassRules(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 60})
		other := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100})

		ann := joinRoom(t, c, id, "ann")
		again := joinRoom(t, c, id, "ann")
		if again.Ticket != ann.Ticket || again.Number != ann.Number {
			t.Errorf("join twice: tickets %q/%d and %q/%d, want the same", ann.Ticket, ann.Number, again.Ticket, again.Number)
		}
		ben := joinRoom(t, c, id, "ben")
		if ben.Number == ann.Number || ben.Ticket == ann.Ticket {
			t.Errorf("two users share ticket %d", ben.Number)
		}
		if v := roomAdminView(t, c, id); v.WaitingRoom == nil || v.WaitingRoom.Tickets != 2 {
			t.Errorf("admin view after 3 joins of 2 users: %+v, want 2 tickets", v.WaitingRoom)
		}
		annT := awaitTicket(t, c, id, ann.Ticket, "admitted", 5*time.Second)
		if annT.Pass == "" || annT.PassExpiresAt == nil {
			t.Fatalf("admitted ticket without a pass: %+v", annT)
		}

		key := roomPassKey(t)
		now := time.Now()
		expired, _ := key.Issue(room.Pass{ItemID: id, UserID: "ann", Ticket: ann.Number, Expiry: now.Add(-time.Second)})
		otherItem, _ := key.Issue(room.Pass{ItemID: other, UserID: "ann", Ticket: ann.Number, Expiry: now.Add(time.Minute)})
		forged, _ := room.GeneratePassKey().Issue(room.Pass{ItemID: id, UserID: "ann", Ticket: ann.Number, Expiry: now.Add(time.Minute)})
		for _, tc := range []struct{ name, user, pass, code string }{
			{"missing", "ann", "", "pass_required"},
			{"forged", "ann", forged, "pass_invalid"},
			{"malformed", "ann", "not-a-pass", "pass_invalid"},
			{"expired", "ann", expired, "pass_expired"},
			{"other user's", "ben", annT.Pass, "pass_wrong_user"},
			{"other item's", "ann", otherItem, "pass_wrong_item"},
		} {
			wantError(t, tc.name+" pass", orderWithPass(t, c, id, tc.user, tc.pass, ""), http.StatusForbidden, tc.code)
		}
		if v := roomAdminView(t, c, id); v.Sold != 0 || v.WaitingRoom.Used != 0 {
			t.Errorf("after refused passes: sold %d used %d, want 0 and 0", v.Sold, v.WaitingRoom.Used)
		}
		// Another item's pass does not open this one, nor this one's the other.
		wantError(t, "this pass on the other item", orderWithPass(t, c, other, "ann", annT.Pass, ""), http.StatusForbidden, "pass_wrong_item")

		r := orderWithPass(t, c, id, "ann", annT.Pass, "ann-key")
		if r.Status != http.StatusCreated {
			t.Fatalf("order with the pass: got %d %s, want 201", r.Status, r.Body)
		}
		if got := awaitTicket(t, c, id, ann.Ticket, "used", 2*time.Second); got.PollAfterMS != 0 || got.Pass != "" {
			t.Errorf("used ticket: %+v, want poll_after_ms 0 and no pass", got)
		}
		wantError(t, "second order on the pass", orderWithPass(t, c, id, "ann", annT.Pass, ""), http.StatusConflict, "already_purchased")
		// The keyed retry replays, even with a pass that has expired since.
		rr := orderWithPass(t, c, id, "ann", expired, "ann-key")
		if rr.Status != http.StatusCreated || rr.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("keyed retry with an expired pass: got %d %s replayed=%q, want 201 replayed", rr.Status, rr.Body, rr.Header.Get("Idempotent-Replayed"))
		}
		// ...but an unknown key with that pass is still refused.
		wantError(t, "new key, expired pass", orderWithPass(t, c, id, "ann", expired, "other-key"), http.StatusForbidden, "pass_expired")
		if v := roomAdminView(t, c, id); v.Sold != 1 || v.WaitingRoom.Used != 1 {
			t.Errorf("after one bought: sold %d used %d, want 1 and 1", v.Sold, v.WaitingRoom.Used)
		}

		m := c.Must(t, "GET", "/metrics", nil, true, nil)
		for _, want := range []string{
			`seckill_room_pass_rejections_total{reason="pass_expired"}`,
			`seckill_room_pass_rejections_total{reason="pass_wrong_user"}`,
			`seckill_room_admitted_total{item="` + itoa(id) + `"}`,
			`seckill_room_waiting{item="` + itoa(id) + `"}`,
			`seckill_room_wait_seconds_count`,
		} {
			if !strings.Contains(string(m.Body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}

		// A forged or another item's ticket string reads nothing.
		for _, tk := range []string{"AAAA", ann.Ticket + "x", joinRoom(t, c, other, "ann").Ticket} {
			r := c.Must(t, "GET", roomPath(id, "/queue/"+tk), nil, false, nil)
			wantError(t, "status of ticket "+tk, r, http.StatusNotFound, "not_found")
		}
	})
}

// Without a room nothing changes; turning a room off frees orders of it.
func TestRoomOff(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		plain := c.CreateItem(t, 3, "lua")
		if r := orderWithPass(t, c, plain.ID, "ann", "", ""); r.Status != http.StatusCreated {
			t.Errorf("order of an item without a room: got %d %s, want 201", r.Status, r.Body)
		}
		r := c.Must(t, "POST", roomPath(plain.ID, "/queue"), map[string]string{"user_id": "ann"}, false, nil)
		wantError(t, "join without a room", r, http.StatusConflict, "no_waiting_room")
		r = c.Must(t, "GET", roomPath(plain.ID, "/draw"), nil, false, nil)
		wantError(t, "draw without a room", r, http.StatusConflict, "no_waiting_room")
		r = c.Must(t, "GET", roomPath(plain.ID, ""), nil, false, nil)
		if r.Status != 200 || string(r.Body) == "" || strings.Contains(string(r.Body), "waiting_room") {
			t.Errorf("public view without a room: %d %s, want no waiting_room", r.Status, r.Body)
		}
		r = c.Must(t, "POST", roomPath(404404, "/queue"), map[string]string{"user_id": "ann"}, false, nil)
		wantError(t, "join of no item", r, http.StatusNotFound, "not_found")

		id := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 5})
		wantError(t, "order before turning off", orderWithPass(t, c, id, "ben", "", ""), http.StatusForbidden, "pass_required")
		r = c.Must(t, "DELETE", "/api/v1/admin/items/"+itoa(id)+"/waiting-room", nil, true, nil)
		if r.Status != http.StatusNoContent {
			t.Fatalf("delete room: got %d %s, want 204", r.Status, r.Body)
		}
		if r := orderWithPass(t, c, id, "ben", "", ""); r.Status != http.StatusCreated {
			t.Errorf("order after the room is off: got %d %s, want 201", r.Status, r.Body)
		}
		r = c.Must(t, "DELETE", "/api/v1/admin/items/"+itoa(id)+"/waiting-room", nil, true, nil)
		wantError(t, "delete twice", r, http.StatusConflict, "no_waiting_room")

		ended := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 5}, func(m map[string]any) {
			m["starts_at"] = time.Now().Add(-time.Hour).UTC()
			m["ends_at"] = time.Now().Add(-time.Minute).UTC()
		})
		r = c.Must(t, "POST", roomPath(ended, "/queue"), map[string]string{"user_id": "ann"}, false, nil)
		wantError(t, "join after ends_at", r, http.StatusConflict, "sale_ended")

		// Strict input: 400 and nothing made.
		for _, body := range []string{
			`{"name":"x","stock":1,"waiting_room":{}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":0}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":100001}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":5,"pass_ttl_seconds":4}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":5,"pass_ttl_seconds":3601}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":5,"lotery":true}}`,
			`{"name":"x","stock":1,"waiting_room":{"admit_per_second":"5"}}`,
		} {
			r := c.Must(t, "POST", "/api/v1/admin/items", body, true, nil)
			wantError(t, body, r, http.StatusBadRequest, "invalid_request")
		}
		r = c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(plain.ID)+"/waiting-room", `{"paused":true}`, true, nil)
		wantError(t, "PUT of a new room without admit_per_second", r, http.StatusBadRequest, "invalid_request")
		r = c.Must(t, "PUT", "/api/v1/admin/items/404404/waiting-room", `{"admit_per_second":5}`, true, nil)
		wantError(t, "PUT on no item", r, http.StatusNotFound, "not_found")
	})
}

// JWT mode: the join's user is the token's (the body's user_id is
// ignored), so a pass is bound to the token's user; a join without a token
// is 401.
func TestRoomJWTMode(t *testing.T) {
	c := startRoomApp(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.UserJWTSecret = jwtSecret })
	id := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 100})
	bearer := func(user string) map[string]string {
		return map[string]string{"Authorization": token(t, jwt.SigningMethodHS256, jwtSecret,
			jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})}
	}
	r := c.Must(t, "POST", roomPath(id, "/queue"), `{"user_id":"mallory"}`, false, nil)
	wantError(t, "join without a token", r, http.StatusUnauthorized, "unauthorized")
	r = c.Must(t, "POST", roomPath(id, "/queue"), `{"user_id":"mallory"}`, false, bearer("ann"))
	if r.Status != http.StatusOK {
		t.Fatalf("join with a token: %d %s", r.Status, r.Body)
	}
	var tk roomTicket
	r.JSON(t, &tk)
	if again := c.Must(t, "POST", roomPath(id, "/queue"), nil, false, bearer("ann")); again.Status != http.StatusOK {
		t.Errorf("join with a token and no body: %d %s", again.Status, again.Body)
	}
	st := awaitTicket(t, c, id, tk.Ticket, "admitted", 5*time.Second)
	h := bearer("mallory")
	h["Seckill-Pass"] = st.Pass
	r = c.Must(t, "POST", roomPath(id, "/orders"), `{}`, false, h)
	wantError(t, "ann's pass with mallory's token", r, http.StatusForbidden, "pass_wrong_user")
	h = bearer("ann")
	h["Seckill-Pass"] = st.Pass
	if r := c.Must(t, "POST", roomPath(id, "/orders"), `{}`, false, h); r.Status != http.StatusCreated {
		t.Errorf("ann's order with her pass: %d %s", r.Status, r.Body)
	}
}
