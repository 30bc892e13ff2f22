package app_test

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// roomTestKey is the services' SECKILL_ROOM_KEY in these tests, so a test
// can sign the passes a key holder could (expired, another item's).
const roomTestKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func roomPassKey(t testing.TB) room.PassKey {
	t.Helper()
	b, _ := hex.DecodeString(roomTestKey)
	k, err := room.NewPassKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startRoomApp is apptest.Start with the test's room key.
func startRoomApp(t testing.TB, b testenv.Backend, edit ...func(*app.Config)) *apptest.Client {
	t.Helper()
	edit = append([]func(*app.Config){func(c *app.Config) { c.RoomKey = roomTestKey }}, edit...)
	_, c := apptest.Start(t, b, edit...)
	return c
}

type roomTicket struct {
	Ticket        string     `json:"ticket"`
	Number        int64      `json:"number"`
	State         string     `json:"state"`
	Drawn         bool       `json:"drawn"`
	Position      int64      `json:"position"`
	Ahead         int64      `json:"ahead"`
	ETASeconds    int64      `json:"eta_seconds"`
	Remaining     int64      `json:"remaining"`
	Pass          string     `json:"pass"`
	PassExpiresAt *time.Time `json:"pass_expires_at"`
	PollAfterMS   int64      `json:"poll_after_ms"`
}

type roomAdmin struct {
	WaitingRoom *struct {
		AdmitPerSecond int    `json:"admit_per_second"`
		Lottery        bool   `json:"lottery"`
		Commitment     string `json:"commitment"`
		Phase          string `json:"phase"`
		Paused         bool   `json:"paused"`
		Closed         bool   `json:"closed"`
		Tickets        int64  `json:"tickets"`
		Waiting        int64  `json:"waiting"`
		Admitted       int64  `json:"admitted"`
		Used           int64  `json:"used"`
		Live           int64  `json:"live"`
		Rate           int64  `json:"rate"`
	} `json:"waiting_room"`
	Sold      int64 `json:"sold"`
	Remaining int64 `json:"remaining"`
}

// createRoomItem creates a lua item of stock units with a waiting room.
func createRoomItem(t testing.TB, c *apptest.Client, stock int64, wr map[string]any, extra ...func(map[string]any)) int64 {
	t.Helper()
	body := map[string]any{"name": "roomed", "stock": stock, "strategy": "lua", "waiting_room": wr}
	for _, e := range extra {
		e(body)
	}
	r := c.Must(t, "POST", "/api/v1/admin/items", body, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create roomed item: got %d %s, want 201", r.Status, r.Body)
	}
	var it struct {
		ID          int64          `json:"id"`
		WaitingRoom map[string]any `json:"waiting_room"`
	}
	r.JSON(t, &it)
	if it.WaitingRoom == nil {
		t.Fatalf("created item shows no waiting_room: %s", r.Body)
	}
	return it.ID
}

func roomPath(id int64, rest string) string { return fmt.Sprintf("/api/v1/items/%d%s", id, rest) }

func joinRoom(t testing.TB, c *apptest.Client, id int64, user string) roomTicket {
	t.Helper()
	r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": user}, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("join %d as %s: got %d %s, want 200", id, user, r.Status, r.Body)
	}
	var tk roomTicket
	r.JSON(t, &tk)
	return tk
}

func ticketStatus(t testing.TB, c *apptest.Client, id int64, ticket string) roomTicket {
	t.Helper()
	r := c.Must(t, "GET", roomPath(id, "/queue/"+ticket), nil, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status of %s: got %d %s, want 200", ticket, r.Status, r.Body)
	}
	var tk roomTicket
	r.JSON(t, &tk)
	return tk
}

// awaitTicket polls a ticket until it reads state, or fails after within.
func awaitTicket(t testing.TB, c *apptest.Client, id int64, ticket, state string, within time.Duration) roomTicket {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		tk := ticketStatus(t, c, id, ticket)
		if tk.State == state {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket %d: state %s after %v, want %s", tk.Number, tk.State, within, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitTicketNot is awaitTicket that also fails if the ticket ever reads
// never on the way.
func awaitTicketNot(t testing.TB, c *apptest.Client, id int64, ticket, state, never string, within time.Duration) roomTicket {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		tk := ticketStatus(t, c, id, ticket)
		switch {
		case tk.State == never:
			t.Fatalf("ticket %d read %s on its way to %s", tk.Number, never, state)
		case tk.State == state:
			return tk
		case time.Now().After(deadline):
			t.Fatalf("ticket %d: state %s after %v, want %s", tk.Number, tk.State, within, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func roomAdminView(t testing.TB, c *apptest.Client, id int64) roomAdmin {
	t.Helper()
	r := c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", id), nil, true, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("admin item: got %d %s", r.Status, r.Body)
	}
	var v roomAdmin
	r.JSON(t, &v)
	return v
}

// orderWithPass places user's order with pass (none when empty) and key.
func orderWithPass(t testing.TB, c *apptest.Client, id int64, user, pass, key string) apptest.Response {
	t.Helper()
	h := map[string]string{}
	if pass != "" {
		h["Seckill-Pass"] = pass
	}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return c.Must(t, "POST", roomPath(id, "/orders"), map[string]string{"user_id": user}, false, h)
}

func wantError(t testing.TB, what string, r apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Errorf("%s: got %d %s, want %d %s", what, r.Status, r.Body, status, code)
	}
}
