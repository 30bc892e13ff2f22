package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// The draw's evidence outlives Redis and the room: every ticket carries its
// line's commitment, the document's history (the database's) records the
// opening, and a checker holding the commitment from before the opening
// refuses the draw once a Redis loss emptied it, or once the room was
// turned off and on (a new line).
func TestRoomDrawEvidence(t *testing.T) {
	// The backends side by side (their rooms open on a clock, not on CPU).
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) {
		c := startRoomApp(t, b)
		opens := time.Now().Add(1500 * time.Millisecond).UTC()
		id := createRoomItem(t, c, 50, map[string]any{"admit_per_second": 1000},
			func(m map[string]any) { m["starts_at"] = opens })
		var pub struct {
			WaitingRoom struct {
				Commitment string `json:"commitment"`
			} `json:"waiting_room"`
		}
		c.Must(t, "GET", roomPath(id, ""), nil, false, nil).JSON(t, &pub)
		c0 := pub.WaitingRoom.Commitment
		if len(c0) != 64 {
			t.Fatalf("public view's commitment %q", c0)
		}
		type ticket struct {
			Ticket     string `json:"ticket"`
			Number     int64  `json:"number"`
			Commitment string `json:"commitment"`
		}
		var tickets []ticket
		for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
			var tk ticket
			c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": u}, false, nil).JSON(t, &tk)
			if tk.Commitment != c0 {
				t.Errorf("%s's join answer carries commitment %q, want the public view's %s", u, tk.Commitment, c0)
			}
			tickets = append(tickets, tk)
		}
		for _, tk := range tickets {
			awaitTicket(t, c, id, tk.Ticket, "admitted", 10*time.Second)
			var st ticket
			c.Must(t, "GET", roomPath(id, "/queue/"+tk.Ticket), nil, false, nil).JSON(t, &st)
			if st.Commitment != c0 {
				t.Errorf("ticket %d's status carries commitment %q, want %s", tk.Number, st.Commitment, c0)
			}
		}
		d := readDraw(t, c, id)
		if a, err := d.Audit(c0); err != nil || !a.OK() {
			t.Fatalf("honest draw against the observed commitment: %+v %v; document %+v", a, err, d)
		}
		if len(d.History) != 1 || d.Line != 1 || d.History[0].PreQueueSize == nil || *d.History[0].PreQueueSize != 6 {
			t.Errorf("history %+v line %d, want one line recording 6 tickets", d.History, d.Line)
		}

		// Redis loses the room: the loop sets it up again, with the same
		// commitment, and opens it with an empty pre-queue.
		testenv.DeleteKeys(t, b.Universal(t), fmt.Sprintf("%s:{item:%d}:room*", b.KeyPrefix, id))
		d = awaitDraw(t, c, id, func(d room.PublicDraw) bool { return d.Seed != "" && len(d.PreQueue) == 0 })
		a, err := d.Audit(c0)
		if err != nil || a.OK() || a.RecordedMatches || a.Recorded == nil || *a.Recorded.PreQueueSize != 6 {
			t.Errorf("draw emptied by a Redis loss: %+v %v, want refused with 6 recorded", a, err)
		}
		if c, err := d.Verify(); err != nil || !c.OK() {
			t.Errorf("the emptied document agrees with itself (%+v %v): only the record shows the loss", c, err)
		}

		// Turned off and on: a new line, the old one kept in the history.
		if r := c.Must(t, "DELETE", "/api/v1/admin/items/"+itoa(id)+"/waiting-room", nil, true, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete room: %d %s", r.Status, r.Body)
		}
		if r := c.Must(t, "PUT", "/api/v1/admin/items/"+itoa(id)+"/waiting-room", map[string]any{"admit_per_second": 100}, true, nil); r.Status != http.StatusOK {
			t.Fatalf("room again: %d %s", r.Status, r.Body)
		}
		// The document reads the line from Redis, then the history from the
		// database: wait for both to show the opening (a read between the
		// two steps of the opening shows the seed not revealed yet).
		d = awaitDraw(t, c, id, func(d room.PublicDraw) bool {
			return d.Commitment != c0 && d.Seed != "" && len(d.History) == 2 && d.History[1].PreQueueSize != nil
		})
		if d.Line != 2 || d.History[0].Commitment != c0 || d.History[0].Seed == "" || *d.History[0].PreQueueSize != 6 {
			t.Errorf("history after the room was turned off and on: %+v line %d, want line 1 (c0, revealed, 6) kept", d.History, d.Line)
		}
		if a, err := d.Audit(c0); err != nil || a.OK() || a.ObservedMatches || a.ObservedLine != 1 {
			t.Errorf("new line against the old commitment: %+v %v, want refused, observed at line 1", a, err)
		}
		if a, err := d.Audit(d.Commitment); err != nil || !a.OK() {
			t.Errorf("new line against its own commitment: %+v %v, want OK", a, err)
		}
	})
}

func readDraw(t *testing.T, c *apptest.Client, id int64) room.PublicDraw {
	t.Helper()
	r := c.Must(t, "GET", roomPath(id, "/draw"), nil, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("draw: %d %s", r.Status, r.Body)
	}
	var doc struct {
		room.PublicDraw
		Lottery bool `json:"lottery"`
	}
	r.JSON(t, &doc)
	return doc.PublicDraw
}

// awaitDraw polls item id's draw until ok says it is the one awaited.
func awaitDraw(t *testing.T, c *apptest.Client, id int64, ok func(room.PublicDraw) bool) room.PublicDraw {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.Must(t, "GET", roomPath(id, "/draw"), nil, false, nil)
		if r.Status == http.StatusOK {
			var d room.PublicDraw
			r.JSON(t, &d)
			if ok(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("draw never became the one awaited: %d %s", r.Status, r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
