package app_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// Sold out: every waiting ticket reads held within about a second (not
// final: ann's unpaid order may still be cancelled, so it keeps polling)
// and a join is 409 sold_out; stock coming back (a cancel, a restock)
// resumes admission in the same line.
func TestRoomSoldOutAndResume(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 1, map[string]any{"admit_per_second": 100})
		ann := joinRoom(t, c, id, "ann")
		annT := awaitTicket(t, c, id, ann.Ticket, "admitted", 5*time.Second)
		// With one unit and factor 1, one pass is live: the others wait.
		var waiting []roomTicket
		for _, u := range []string{"ben", "cat", "dan"} {
			waiting = append(waiting, joinRoom(t, c, id, u))
		}
		r := orderWithPass(t, c, id, "ann", annT.Pass, "")
		if r.Status != http.StatusCreated {
			t.Fatalf("ann's order: got %d %s", r.Status, r.Body)
		}
		var order struct {
			ID string `json:"id"`
		}
		r.JSON(t, &order)
		soldAt := time.Now()
		for _, w := range waiting {
			// Never admitted on the way: no pass beyond the stock, even while
			// the service's figure of the remaining stock is a moment old.
			got := awaitTicketNot(t, c, id, w.Ticket, "held", "admitted", 3*time.Second)
			if got.PollAfterMS <= 0 {
				t.Errorf("held ticket (a unit may come back) advises poll_after_ms %d, want polling on", got.PollAfterMS)
			}
		}
		t.Logf("every waiting ticket read held %v after the last unit sold", time.Since(soldAt))
		r = c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "eve"}, false, nil)
		wantError(t, "join after sold out", r, http.StatusConflict, "sold_out")
		if v := roomAdminView(t, c, id); v.WaitingRoom.Phase != "closed" || !v.WaitingRoom.Closed || v.WaitingRoom.Admitted != 1 {
			t.Errorf("admin view sold out: %+v, want phase closed with 1 admitted (ann)", v.WaitingRoom)
		}

		// A cancel hands the unit back: the line goes on, first in line next.
		if r, _ := c.SettleOrder(order.ID, "cancel", map[string]string{"user_id": "ann"}, nil); r.Status != http.StatusOK {
			t.Fatalf("cancel: got %d %s", r.Status, r.Body)
		}
		benT := awaitTicket(t, c, id, waiting[0].Ticket, "admitted", 5*time.Second)
		if st := ticketStatus(t, c, id, waiting[1].Ticket); st.State != "waiting" || st.Position != 1 {
			t.Errorf("cat after the resume: %+v, want waiting at position 1", st)
		}
		if r := orderWithPass(t, c, id, "ben", benT.Pass, ""); r.Status != http.StatusCreated {
			t.Fatalf("ben's order after the resume: got %d %s", r.Status, r.Body)
		}
		awaitTicket(t, c, id, waiting[1].Ticket, "held", 3*time.Second)

		// A restock resumes it again.
		if r := c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(id)+"/stock", map[string]int64{"stock": 3}, true, nil); r.Status != http.StatusOK {
			t.Fatalf("restock: got %d %s", r.Status, r.Body)
		}
		catT := awaitTicket(t, c, id, waiting[1].Ticket, "admitted", 5*time.Second)
		awaitTicket(t, c, id, waiting[2].Ticket, "admitted", 5*time.Second)
		if r := orderWithPass(t, c, id, "cat", catT.Pass, ""); r.Status != http.StatusCreated {
			t.Errorf("cat's order after the restock: got %d %s", r.Status, r.Body)
		}
		if v := roomAdminView(t, c, id); v.Sold != 2 {
			t.Errorf("sold %d, want 2 (ben, cat)", v.Sold)
		}
	})
}

// Paused: joins queue, nobody is admitted; unpaused, the line moves.
func TestRoomPaused(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100, "paused": true})
		ann := joinRoom(t, c, id, "ann")
		// The loop runs every 100 ms: wait until it has run (it records the
		// rate), then for several more ticks, and nobody is admitted.
		deadline := time.Now().Add(5 * time.Second)
		for roomAdminView(t, c, id).WaitingRoom.Rate == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the admission loop never ran")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // five ticks: a negative cannot be awaited
		if st := ticketStatus(t, c, id, ann.Ticket); st.State != "waiting" || st.Position != 1 {
			t.Fatalf("paused room: ann %+v, want waiting at 1", st)
		}
		if v := roomAdminView(t, c, id); !v.WaitingRoom.Paused || v.WaitingRoom.Admitted != 0 {
			t.Errorf("paused admin view: %+v", v.WaitingRoom)
		}
		r := c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(id)+"/waiting-room",
			map[string]any{"paused": false, "admit_per_second": 50, "pass_ttl_seconds": 20}, true, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("unpause: got %d %s", r.Status, r.Body)
		}
		got := awaitTicket(t, c, id, ann.Ticket, "admitted", 5*time.Second)
		// The new TTL (20 s, the default being 60) holds for this admission.
		if left := time.Until(*got.PassExpiresAt); left > 21*time.Second || left <= 0 {
			t.Errorf("pass admitted after the TTL became 20 s expires in %v", left)
		}
		if v := roomAdminView(t, c, id); v.WaitingRoom.AdmitPerSecond != 50 || v.WaitingRoom.Paused {
			t.Errorf("after PUT: %+v, want R 50 unpaused", v.WaitingRoom)
		}
	})
}

// The opening draw: tickets taken before starts_at are undrawn (position
// 0, ETA -1), then served in the draw's order, which the public document
// lets anyone verify; lottery off serves them in ticket order, with their
// places known at once. Changing lottery once anyone joined is 409.
func TestRoomDrawAndFIFO(t *testing.T) {
	// The backends side by side (their rooms open on a clock, not on CPU).
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		opens := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
		withStart := func(m map[string]any) { m["starts_at"] = opens }
		lot := createRoomItem(t, c, 50, map[string]any{"admit_per_second": 1000}, withStart)
		// FIFO at 4 a second: the admissions spread over two seconds, so
		// their order shows in the passes' expiries.
		fifo := createRoomItem(t, c, 50, map[string]any{"admit_per_second": 4, "lottery": false}, withStart)

		users := []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"}
		var lotT, fifoT []roomTicket
		for _, u := range users {
			lotT = append(lotT, joinRoom(t, c, lot, u))
			fifoT = append(fifoT, joinRoom(t, c, fifo, u))
		}
		for i, tk := range lotT {
			if tk.Drawn || tk.Position != 0 || tk.ETASeconds != -1 || tk.PollAfterMS != 1000 {
				t.Errorf("pre-queue ticket %d before the opening: %+v, want undrawn, 0, -1, poll 1000", i+1, tk)
			}
		}
		for i, tk := range fifoT {
			if !tk.Drawn || tk.Position != int64(i+1) {
				t.Errorf("FIFO ticket %d before the opening: %+v, want position %d", i+1, tk, i+1)
			}
		}
		var pub struct {
			WaitingRoom struct {
				Phase      string `json:"phase"`
				Lottery    bool   `json:"lottery"`
				Commitment string `json:"commitment"`
			} `json:"waiting_room"`
		}
		c.Must(t, "GET", roomPath(lot, ""), nil, false, nil).JSON(t, &pub)
		if pub.WaitingRoom.Phase != "pre" || !pub.WaitingRoom.Lottery || len(pub.WaitingRoom.Commitment) != 64 {
			t.Errorf("public view before the opening: %+v, want phase pre with a lottery and its commitment", pub.WaitingRoom)
		}
		r := c.Must(t, "GET", roomPath(lot, "/draw"), nil, false, nil)
		var before struct {
			Seed       *string `json:"seed"`
			Commitment string  `json:"commitment"`
		}
		r.JSON(t, &before)
		if r.Status != 200 || before.Seed != nil || len(before.Commitment) != 64 {
			t.Errorf("draw before the opening: %d %s, want a commitment and a null seed", r.Status, r.Body)
		}
		r = c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(lot)+"/waiting-room", map[string]any{"lottery": false}, true, nil)
		wantError(t, "lottery change with tickets", r, http.StatusConflict, "room_opened")

		for _, tk := range lotT {
			awaitTicket(t, c, lot, tk.Ticket, "admitted", 10*time.Second)
		}
		for _, tk := range fifoT {
			awaitTicket(t, c, fifo, tk.Ticket, "admitted", 10*time.Second)
		}
		r = c.Must(t, "GET", roomPath(lot, "/draw"), nil, false, nil)
		var d room.PublicDraw
		r.JSON(t, &d)
		check, err := d.Verify()
		if err != nil || !check.OK() || len(d.Served) != len(users) || len(d.PreQueue) != len(users) {
			t.Errorf("draw after the opening: %s: verify %+v %v, want it to check out with %d served", r.Body, check, err, len(users))
		}
		r = c.Must(t, "GET", roomPath(fifo, "/draw"), nil, false, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"lottery":false`) || strings.Contains(string(r.Body), `"commitment"`) {
			t.Errorf("FIFO draw: %d %s, want lottery false and no commitment", r.Status, r.Body)
		}
		// FIFO: each ticket's pass expires no earlier than the one before
		// (admitted in number order: in a later Admit call, or the same).
		var last time.Time
		for i, tk := range fifoT {
			st := ticketStatus(t, c, fifo, tk.Ticket)
			if st.PassExpiresAt == nil || st.PassExpiresAt.Before(last) {
				t.Errorf("FIFO ticket %d admitted out of order: expiry %v before %v", i+1, st.PassExpiresAt, last)
			} else {
				last = *st.PassExpiresAt
			}
		}
		r = c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(fifo)+"/waiting-room", map[string]any{"lottery": true}, true, nil)
		wantError(t, "lottery change after the opening", r, http.StatusConflict, "room_opened")
	})
}

// After the opening a waiting ticket's place (answered from memory, see
// DESIGN "Cheap polls") is its place in the published draw; unpaused, the
// draw's first ticket is admitted first.
func TestRoomPollPositionsFollowTheDraw(t *testing.T) {
	// The backends side by side (their rooms open on a clock, not on CPU).
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		opens := time.Now().Add(1500 * time.Millisecond).UTC()
		id := createRoomItem(t, c, 50, map[string]any{"admit_per_second": 1, "paused": true},
			func(m map[string]any) { m["starts_at"] = opens })
		var tickets []roomTicket
		for _, u := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
			tickets = append(tickets, joinRoom(t, c, id, u))
		}
		var d room.PublicDraw
		deadline := time.Now().Add(10 * time.Second)
		for d.Seed == "" {
			if time.Now().After(deadline) {
				t.Fatal("the room never opened")
			}
			time.Sleep(50 * time.Millisecond)
			r := c.Must(t, "GET", roomPath(id, "/draw"), nil, false, nil)
			r.JSON(t, &d)
		}
		seed, err := room.ParseSeed(d.Seed)
		if err != nil {
			t.Fatal(err)
		}
		// The transcript, recomputed from the ticket strings the joins
		// answered: each one's leaf is published at its number.
		leaves := make([][32]byte, len(d.PreQueue))
		for _, tk := range tickets {
			if tk.Number < 1 || tk.Number > int64(len(leaves)) || !d.HoldsTicket(tk.Number, tk.Ticket) {
				t.Fatalf("ticket %d's leaf is not in the draw's leaves %v", tk.Number, d.Leaves)
			}
			leaves[tk.Number-1] = room.TicketLeaf(tk.Ticket)
		}
		tr := room.TranscriptOf(leaves)
		if d.Transcript != tr.String() {
			t.Fatalf("draw's transcript %q, from the buyers' tickets %s", d.Transcript, tr)
		}
		order, err := room.DrawOrder(seed, tr, d.PreQueue)
		if err != nil || len(order) != len(tickets) {
			t.Fatalf("draw order %v %v", order, err)
		}
		place := map[int64]int64{}
		for i, n := range order {
			place[n] = int64(i + 1)
		}
		for _, tk := range tickets {
			// Twice: a poll right after the opening and one a tick later.
			for range 2 {
				st := ticketStatus(t, c, id, tk.Ticket)
				if st.State != "waiting" || !st.Drawn || st.Position != place[tk.Number] || st.Ahead != place[tk.Number]-1 {
					t.Errorf("ticket %d after the opening: %+v, want waiting at draw place %d", tk.Number, st, place[tk.Number])
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		r := c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(id)+"/waiting-room", map[string]any{"paused": false}, true, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("unpause: %d %s", r.Status, r.Body)
		}
		for _, tk := range tickets {
			if tk.Number == order[0] {
				awaitTicket(t, c, id, tk.Ticket, "admitted", 5*time.Second)
			}
		}
		r = c.Must(t, "GET", roomPath(id, "/draw"), nil, false, nil)
		r.JSON(t, &d)
		if check, err := d.Verify(); err != nil || !check.OK() || len(d.Served) == 0 || d.Served[0] != order[0] {
			t.Errorf("draw after the first admission: %s, want it to check out and serve %d first", r.Body, order[0])
		}
	})
}

// The status as Server-Sent Events: status events until the state is final
// (here: admitted, then used once the pass bought), then the stream ends.
func TestRoomStatusEvents(t *testing.T) {
	c := startRoomApp(t, testenv.Embedded(t))
	id := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 100})
	tk := joinRoom(t, c, id, "ann")
	resp, err := c.HTTP.Get(c.Base + roomPath(id, "/queue/"+tk.Ticket+"/events"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var states []string
	bought := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var st roomTicket
		if err := json.Unmarshal([]byte(data), &st); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if st.Ticket != tk.Ticket {
			t.Errorf("event of ticket %q, want %q", st.Ticket, tk.Ticket)
		}
		states = append(states, st.State)
		if st.State == "admitted" && !bought {
			bought = true
			if r := orderWithPass(t, c, id, "ann", st.Pass, ""); r.Status != http.StatusCreated {
				t.Fatalf("order with the streamed pass: %d %s", r.Status, r.Body)
			}
		}
	}
	if len(states) < 2 || states[len(states)-1] != "used" || !bought {
		t.Errorf("streamed states %v, want admitted then used (and the stream ended)", states)
	}
}
