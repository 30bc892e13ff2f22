package app_test

import (
	"fmt"
	"net/http"
	"testing"

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
// with spaces take the same one place. Every 200 is valid JSON.
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
		var tk roomTicket
		r.JSON(t, &tk)
		tickets = append(tickets, tk.Ticket)
	}
	if tickets[0] != tickets[1] || tickets[1] != tickets[2] {
		t.Errorf("ann's joins answered tickets %q, want one", tickets)
	}
	if a := roomAdminView(t, c, id); a.WaitingRoom == nil || a.WaitingRoom.Tickets != 1 {
		t.Errorf("room after the joins: %+v, want 1 ticket", a.WaitingRoom)
	}
}
