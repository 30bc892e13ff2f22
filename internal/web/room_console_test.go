package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// roomSettings is an item's waiting room in the admin view (docs/API.md, "Waiting room").
type roomSettings struct {
	AdmitPerSecond int64  `json:"admit_per_second"`
	PassTTLSeconds int64  `json:"pass_ttl_seconds"`
	Lottery        bool   `json:"lottery"`
	Paused         bool   `json:"paused"`
	Phase          string `json:"phase"`
	Waiting        int64  `json:"waiting"`
	Used           int64  `json:"used"`
	Expired        int64  `json:"expired"`
}

func adminRoom(t *testing.T, c *apptest.Client, id int64) *roomSettings {
	t.Helper()
	var it struct {
		WaitingRoom *roomSettings `json:"waiting_room"`
	}
	r := c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", id), nil, true, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("admin item: got %d %s", r.Status, r.Body)
	}
	r.JSON(t, &it)
	return it.WaitingRoom
}

// TestConsoleWaitingRoom: an item created through the console's form with
// a waiting room has it; its detail shows the room live (waiting, passes
// used and expired); pausing, resuming and changing the rate through the
// buttons change it, as the API then says; it can be removed and added.
func TestConsoleWaitingRoom(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel()
		_, c := apptest.Start(t, b)
		tb := br.tab(t)
		tb.do("open the console", chromedp.Navigate(c.Base+"/admin/"))
		signIn(tb, c)
		tb.do("fill the create form",
			keys("#new-name", "Leica Q3 43"), keys("#new-stock", "3"), keys("#new-price", "6990.00"),
			keys("#new-room-rate", "2"), keys("#new-room-ttl", "5"), click("#new-room-lottery"),
			click("#create-form button[type=submit]"))
		tb.wait("the created item's detail", `!document.getElementById("detail").hidden && !document.getElementById("room-info").hidden`)
		var id int64
		if _, err := fmt.Sscan(tb.text("#d-id"), &id); err != nil {
			t.Fatalf("detail id %q: %v", tb.text("#d-id"), err)
		}
		wr := adminRoom(t, c, id)
		if wr == nil || wr.AdmitPerSecond != 2 || wr.PassTTLSeconds != 5 || wr.Lottery || wr.Paused {
			t.Fatalf("created room: got %+v, want 2 a second, 5 s passes, no draw, running", wr)
		}
		if got := tb.text("#r-settings"); !strings.Contains(got, "up to 2 a second") || !strings.Contains(got, "no draw") {
			t.Errorf("room settings shown: got %q", got)
		}
		if got := tb.text("#r-admission"); got != "running" {
			t.Errorf("admission: got %q, want running", got)
		}

		// Pause: nobody new is let in; joins still queue, and the live
		// view counts them.
		tb.do("pause", click("#r-pause"))
		tb.wait("paused", `document.getElementById("r-admission").textContent === "paused" && document.getElementById("r-pause").textContent === "Resume admission"`)
		if wr := adminRoom(t, c, id); wr == nil || !wr.Paused {
			t.Fatalf("after pause: got %+v, want paused", wr)
		}
		users := []string{"zhang.wei", "li.na", "wang.fang"}
		tickets := map[string]ticketStatus{}
		for _, u := range users {
			tickets[u] = joinQueue(t, c, id, u)
		}
		tb.wait("three waiting", `document.getElementById("r-waiting").textContent === "3" && document.getElementById("r-tickets").textContent === "3"`)

		// A new rate through the form.
		tb.do("change R", setValue("#r-new-rate", "40"), click("#r-set"))
		tb.wait("the new rate", `document.getElementById("r-settings").textContent.includes("up to 40 a second")`)
		if wr := adminRoom(t, c, id); wr == nil || wr.AdmitPerSecond != 40 || !wr.Paused {
			t.Fatalf("after changing R: got %+v, want 40 a second, still paused", wr)
		}

		// Resume: the three are let in; one buys, two let their pass
		// expire.
		tb.do("resume", click("#r-pause"))
		tb.wait("running", `document.getElementById("r-admission").textContent === "running" && document.getElementById("r-pause").textContent === "Pause admission"`)
		if wr := adminRoom(t, c, id); wr == nil || wr.Paused {
			t.Fatalf("after resume: got %+v, want running", wr)
		}
		tb.wait("nobody waiting", `document.getElementById("r-waiting").textContent === "0"`)
		st := awaitAdmitted(t, c, id, tickets[users[0]].Ticket)
		if r := c.Must(t, "POST", fmt.Sprintf("/api/v1/items/%d/orders", id), map[string]string{"user_id": users[0]}, false,
			map[string]string{"Seckill-Pass": st.Pass}); r.Status != http.StatusCreated {
			t.Fatalf("order with the pass: got %d %s, want 201", r.Status, r.Body)
		}
		tb.waitUpTo("one pass used, two expired", `document.getElementById("r-used").textContent === "1" && document.getElementById("r-expired").textContent === "2"`, 30*time.Second)
		if wr := adminRoom(t, c, id); wr == nil || wr.Used != 1 || wr.Expired != 2 {
			t.Errorf("room counters: got %+v, want 1 used, 2 expired", wr)
		}

		// Remove the room (confirmed), then add one again.
		tb.do("remove", click("#r-remove"))
		tb.wait("the confirmation", `document.getElementById("confirm").open`)
		tb.do("confirm", click("#confirm-ok"))
		tb.wait("no room", `!document.getElementById("room-none").hidden && document.getElementById("r-set").textContent === "Add a waiting room"`)
		if wr := adminRoom(t, c, id); wr != nil {
			t.Fatalf("after removing the room: got %+v, want none", wr)
		}
		tb.do("add a room", setValue("#r-new-rate", "7"), click("#r-set"))
		tb.wait("the new room", `!document.getElementById("room-info").hidden && document.getElementById("r-settings").textContent.includes("up to 7 a second")`)
		if wr := adminRoom(t, c, id); wr == nil || wr.AdmitPerSecond != 7 {
			t.Errorf("after adding a room: got %+v, want 7 a second", wr)
		}
		tb.clean()
	})
}

// awaitAdmitted reads a ticket's status until it is admitted, as a client
// does: after poll_after_ms.
func awaitAdmitted(t *testing.T, c *apptest.Client, id int64, ticket string) ticketStatus {
	t.Helper()
	for range 60 {
		st := queueStatus(t, c, id, ticket)
		if st.State == "admitted" {
			return st
		}
		if st.PollAfterMS == 0 {
			t.Fatalf("ticket final without admission: %+v", st)
		}
		time.Sleep(time.Duration(st.PollAfterMS) * time.Millisecond)
	}
	t.Fatal("not admitted after 60 polls")
	return ticketStatus{}
}
