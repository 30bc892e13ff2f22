package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// The same Idempotency-Key gives the same answer, waiting room or not: an
// order placed under a key before the item's room was turned on (so
// without a pass, which did not exist yet) is replayed when its client
// retries with that key after the room is on (the first answer was lost),
// at the instance that knows the room as at the one that does not yet.
// The retry carries what the first attempt carried: no pass. It must not
// be 403 pass_required while the key's order stands.
func TestRoomKeyedRetryOfAnOrderFromBeforeTheRoom(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	db := b.DB(t)
	for _, strategy := range []string{"lua", "lock", "lua-async"} {
		t.Run(strategy, func(t *testing.T) {
			id := a.CreateItem(t, 5, strategy).ID
			first := orderWithPass(t, a, id, "ann", "", "ann-key")
			if first.Status != http.StatusCreated && first.Status != http.StatusAccepted {
				t.Fatalf("order before the room: got %d %s", first.Status, first.Body)
			}
			var o struct {
				ID string `json:"id"`
			}
			first.JSON(t, &o)
			awaitSold(t, db, id, 1)
			if r := a.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id), map[string]any{"admit_per_second": 10}, true, nil); r.Status != http.StatusOK {
				t.Fatalf("turn the room on: got %d %s", r.Status, r.Body)
			}
			r := orderWithPass(t, a, id, "ann", "", "ann-key")
			if r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
				t.Fatalf("keyed retry of an order placed before the room: got %d %s, want its order replayed", r.Status, r.Body)
			}
			var again struct {
				ID string `json:"id"`
			}
			r.JSON(t, &again)
			if again.ID != o.ID || r.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("keyed retry: order %s (replayed %q), want %s replayed", again.ID, r.Header.Get("Idempotent-Replayed"), o.ID)
			}
			// Another user's attempt without a pass is still refused, and
			// a key that names no order does not open the way.
			wantError(t, "another user's order without a pass", orderWithPass(t, a, id, "ben", "", "ben-key"), http.StatusForbidden, "pass_required")
			if n := ordersOf(t, db, id, "ben"); n != 0 {
				t.Errorf("ben has %d order rows, want 0", n)
			}
		})
	}
}

// A join's body is read as strictly as an order's, fast path or not: a
// user id JSON escapes (a quote, a backslash, a control character,
// non-ASCII), an unknown or repeated member, or anything after the object
// is 400 invalid_request and takes no place; the plain body and the same
// with spaces take the same one place. Every 200 is valid JSON, and it and
// a status poll are marked not to be cached.
func TestRoomJoinBodyStrict(t *testing.T) {
	t.Parallel()
	c := startRoomApp(t, testenv.Embedded(t))
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100})
	for _, body := range []string{
		`{"user_id":"a\"b"}`, `{"user_id":"a\\b"}`, `{"user_id":"a\u0001b"}`, `{"user_id":"\u00e9"}`,
		"{\"user_id\":\"\xc3\xa9\"}", `{"user_id":"a b"}`, `{"user_id":"ann","user_id":"ben"}`,
		`{"user_id":"ann","USER_ID":"ben"}`, `{"user_id":"ann"}{}`, `{"user_id":"ann"}"x"`, `{"user_id":"ann","x":1}`,
		`{"user_id":"ann\"}`, `{"user_id":""}`,
	} {
		r := c.Must(t, "POST", roomPath(id, "/queue"), body, false, nil)
		wantError(t, "join with body "+body, r, http.StatusBadRequest, "invalid_request")
	}
	var tickets []string
	for _, body := range []string{`{"user_id":"ann"}`, ` { "user_id" : "ann" } `, `{"user_id":"ann","pow":null}`} {
		r := c.Must(t, "POST", roomPath(id, "/queue"), body, false, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("join with body %s: got %d %s, want 200", body, r.Status, r.Body)
		}
		if cc := r.Header.Values("Cache-Control"); len(cc) != 1 || cc[0] != "no-store" {
			t.Errorf("join with body %s: Cache-Control %q, want no-store (a ticket is its holder's)", body, cc)
		}
		var tk roomTicket
		r.JSON(t, &tk)
		tickets = append(tickets, tk.Ticket)
	}
	if r := c.Must(t, "GET", roomPath(id, "/queue/"+tickets[0]), nil, false, nil); r.Status != http.StatusOK ||
		r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("status poll: got %d, Cache-Control %q; want 200 and no-store", r.Status, r.Header.Get("Cache-Control"))
	}
	if tickets[0] != tickets[1] || tickets[1] != tickets[2] {
		t.Errorf("ann's joins answered tickets %q, want one", tickets)
	}
	if a := roomAdminView(t, c, id); a.WaitingRoom == nil || a.WaitingRoom.Tickets != 1 {
		t.Errorf("room after the joins: %+v, want 1 ticket", a.WaitingRoom)
	}
}

// A room turned off and on again starts a new line, whose ticket numbers
// start over; a pass of the old line, still within its lifetime, names a
// number that is now someone else's. Its use must not touch the new
// line's ticket of that number: ben, admitted with ticket 1 of the new
// line, still reads admitted with his pass after ann bought with her old
// pass of ticket 1, and buys with it.
func TestRoomOldPassDoesNotSpendAnotherUsersTicket(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	c := startRoomApp(t, b)
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 300})
	ann := joinRoom(t, c, id, "ann")
	ann = awaitTicket(t, c, id, ann.Ticket, "admitted", 10*time.Second)
	if ann.Number != 1 || ann.Pass == "" {
		t.Fatalf("ann: ticket %d, pass %q; want 1 with a pass", ann.Number, ann.Pass)
	}
	path := fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id)
	if r := c.Must(t, "DELETE", path, nil, true, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete room: got %d %s", r.Status, r.Body)
	}
	if r := c.Must(t, "PUT", path, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 300}, true, nil); r.Status != http.StatusOK {
		t.Fatalf("set room again: got %d %s", r.Status, r.Body)
	}
	ben := joinRoom(t, c, id, "ben")
	ben = awaitTicket(t, c, id, ben.Ticket, "admitted", 10*time.Second)
	if ben.Number != 1 || ben.Pass == "" {
		t.Fatalf("ben: ticket %d of the new line, pass %q; want 1 with a pass", ben.Number, ben.Pass)
	}
	// ann's old pass: bought or refused, either way ben's place stands.
	r := orderWithPass(t, c, id, "ann", ann.Pass, "")
	if r.Status != http.StatusCreated && r.Status != http.StatusForbidden {
		t.Fatalf("ann's order with her old line's pass: got %d %s, want 201 or 403", r.Status, r.Body)
	}
	if got := ticketStatus(t, c, id, ben.Ticket); got.State != "admitted" || got.Pass != ben.Pass {
		t.Errorf("ben's ticket after ann's order with the old pass: state %s, pass %q; want admitted with his pass", got.State, got.Pass)
	}
	if r := orderWithPass(t, c, id, "ben", ben.Pass, ""); r.Status != http.StatusCreated {
		t.Errorf("ben's order with his pass: got %d %s, want 201", r.Status, r.Body)
	}
}

// lua-async: PUT and DELETE of an item's room race on two instances,
// rounds after rounds, while orders without a pass go to both (and one
// round loses the gate). Once each round's changes have answered, the
// gate's room mark says what the database says, and an order without a
// pass is refused (403) exactly when the room is on.
func TestRoomAsyncMarkFollowsRacingChanges(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	rdb := b.Universal(t)
	db := b.DB(t)
	keys := gateKeys(t, b.KeyPrefix)
	id := a.CreateItem(t, 1000, "lua-async").ID
	path := fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id)
	var wg sync.WaitGroup
	for round := range 12 {
		if round == 6 {
			loseGate(t, rdb, b.KeyPrefix, id, 1)
		}
		put, del := a, c
		if round%2 == 1 {
			put, del = c, a
		}
		wg.Go(func() {
			r := put.Must(t, "PUT", path, map[string]any{"admit_per_second": 10}, true, nil)
			if r.Status != http.StatusOK {
				t.Errorf("round %d: PUT: got %d %s", round, r.Status, r.Body)
			}
		})
		wg.Go(func() {
			r := del.Must(t, "DELETE", path, nil, true, nil)
			if r.Status != http.StatusNoContent && r.ErrorCode() != "no_waiting_room" {
				t.Errorf("round %d: DELETE: got %d %s", round, r.Status, r.Body)
			}
		})
		for i, inst := range []*apptest.Client{a, c} {
			wg.Go(func() {
				r := orderWithPass(t, inst, id, fmt.Sprintf("r%d-%d", round, i), "", "")
				if r.Status != http.StatusAccepted && r.Status != http.StatusForbidden {
					t.Errorf("round %d: order without a pass: got %d %s", round, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		var rows int64
		if err := db.Raw("SELECT COUNT(*) FROM item_rooms WHERE item_id = ?", id).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		mark, err := rdb.HGet(context.Background(), keys.Meta(id), "room").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		exists, err := rdb.HExists(context.Background(), keys.Meta(id), "stock").Result()
		if err != nil {
			t.Fatal(err)
		}
		if exists && (mark == "1") != (rows == 1) {
			t.Errorf("round %d: the database has %d rooms of the item, the gate's mark %q", round, rows, mark)
		}
		if rows == 1 {
			// The instance that made the last change knows; both refuse.
			for i, inst := range []*apptest.Client{a, c} {
				r := orderWithPass(t, inst, id, fmt.Sprintf("check%d-%d", round, i), "", "")
				wantError(t, fmt.Sprintf("round %d: order without a pass while the room is on", round), r, http.StatusForbidden, "pass_required")
			}
		}
	}
}

// The Seckill-Pass header given twice is 400 wherever the order goes: at
// the instance that knows the item's room as at one that does not yet
// (which verifies a pass too, and must not buy with the first of two),
// and changes nothing.
func TestRoomPassHeaderTwiceIsInvalidEverywhere(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	db := b.DB(t)
	for _, strategy := range []string{"lua", "lock", "lua-async"} {
		t.Run(strategy, func(t *testing.T) {
			id := a.CreateItem(t, 5, strategy).ID
			if r := orderWithPass(t, c, id, "early", "", ""); r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
				t.Fatalf("order before the room: got %d %s", r.Status, r.Body)
			}
			if r := a.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id), map[string]any{"admit_per_second": 10}, true, nil); r.Status != http.StatusOK {
				t.Fatalf("turn the room on: got %d %s", r.Status, r.Body)
			}
			for _, inst := range []*apptest.Client{c, a} {
				pass, err := roomPassKey(t).Issue(room.Pass{ItemID: id, UserID: "twice", Ticket: 1, Expiry: time.Now().Add(time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				r, err := inst.DoHeader("POST", roomPath(id, "/orders"), map[string]string{"user_id": "twice"}, false,
					http.Header{"Seckill-Pass": {pass, "forged"}})
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, "order with two Seckill-Pass headers", r, http.StatusBadRequest, "invalid_request")
			}
			if n := ordersOf(t, db, id, "twice"); n != 0 {
				t.Errorf("%d orders of the user who sent two passes, want 0", n)
			}
		})
	}
}
