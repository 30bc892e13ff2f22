package app_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// TestRoomProofOfWork, end to end with SECKILL_ROOM_POW_BITS on: a join
// without a proof, or with a bad one, is a 403 that takes no place; a
// solved challenge from the service joins, and again answers the same
// ticket; a challenge signed with the rooms' key elsewhere (another
// instance sharing SECKILL_ROOM_KEY) is accepted.
func TestRoomProofOfWork(t *testing.T) {
	const bits = 10
	c := startRoomApp(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.RoomPoWBits = bits })
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100})

	join := func(user string, pow map[string]string) (int, string, roomTicket) {
		t.Helper()
		body := map[string]any{"user_id": user}
		if pow != nil {
			body["pow"] = pow
		}
		r := c.Must(t, "POST", roomPath(id, "/queue"), body, false, nil)
		var tk roomTicket
		if r.Status == http.StatusOK {
			r.JSON(t, &tk)
		}
		return r.Status, r.ErrorCode(), tk
	}
	challenge := func(user string) (string, int) {
		t.Helper()
		r := c.Must(t, "GET", roomPath(id, "/queue/challenge?user_id="+url.QueryEscape(user)), nil, false, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("challenge for %s: got %d %s", user, r.Status, r.Body)
		}
		var ch struct {
			Challenge string    `json:"challenge"`
			Bits      int       `json:"bits"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		r.JSON(t, &ch)
		if ch.Bits != bits || ch.Challenge == "" || ch.ExpiresAt.IsZero() {
			t.Fatalf("challenge: got %s, want one of %d bits with its expiry", r.Body, bits)
		}
		return ch.Challenge, ch.Bits
	}

	if st, code, _ := join("ann", nil); st != http.StatusForbidden || code != "pow_required" {
		t.Errorf("join without a proof: got %d %s, want 403 pow_required", st, code)
	}
	annC, annBits := challenge("ann")
	annNonce := room.SolvePoW(annC, annBits)
	noWork := ""
	for n := 0; noWork == ""; n++ {
		if s := strconv.Itoa(n); room.PoWZeroBits(annC, s) < bits {
			noWork = s
		}
	}
	for name, tc := range map[string]struct {
		user string
		pow  map[string]string
	}{
		"no work":            {"ann", map[string]string{"challenge": annC, "nonce": noWork}},
		"not a number":       {"ann", map[string]string{"challenge": annC, "nonce": "twelve"}},
		"ann's proof by ben": {"ben", map[string]string{"challenge": annC, "nonce": annNonce}},
		"made-up challenge":  {"ann", map[string]string{"challenge": "bm90LWEtY2hhbGxlbmdl", "nonce": "1"}},
	} {
		if st, code, _ := join(tc.user, tc.pow); st != http.StatusForbidden || code != "pow_invalid" {
			t.Errorf("%s: got %d %s, want 403 pow_invalid", name, st, code)
		}
	}
	if v := roomAdminView(t, c, id); v.WaitingRoom == nil || v.WaitingRoom.Tickets != 0 {
		t.Fatalf("after refused proofs: %+v, want no ticket", v.WaitingRoom)
	}

	st, code, ann := join("ann", map[string]string{"challenge": annC, "nonce": annNonce})
	if st != http.StatusOK || ann.Ticket == "" {
		t.Fatalf("join with a solved challenge: got %d %s", st, code)
	}
	// The replay a challenge allows: the same user, the same place.
	if st, _, again := join("ann", map[string]string{"challenge": annC, "nonce": annNonce}); st != http.StatusOK || again.Ticket != ann.Ticket {
		t.Errorf("the same proof again: got %d ticket %q, want 200 and %q", st, again.Ticket, ann.Ticket)
	}

	// Another instance with the same SECKILL_ROOM_KEY signs challenges this
	// one accepts.
	ext, _, err := room.IssueChallenge(roomPassKey(t), id, "ben", bits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st, code, ben := join("ben", map[string]string{"challenge": ext, "nonce": room.SolvePoW(ext, bits)}); st != http.StatusOK || ben.Ticket == ann.Ticket {
		t.Errorf("a challenge signed with the shared key: got %d %s (ticket %q)", st, code, ben.Ticket)
	}
	if v := roomAdminView(t, c, id); v.WaitingRoom.Tickets != 2 {
		t.Errorf("tickets: got %d, want 2 (ann once, ben)", v.WaitingRoom.Tickets)
	}
}
