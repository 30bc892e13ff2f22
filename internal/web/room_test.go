package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The waiting room's sale (issue 21): one camera, two people queueing
// before the opening.
var (
	camera      = struct{ name, price string }{"Leica Q3 43", "Price: 6,990.00"}
	queuers     = []string{"zhang.wei", "li.na"}
	beforeStart = 20 * time.Second // time enough for two tabs to join first (3.5 s at a load average of 19 one day, 6.8-8.2 s on a slower one, 9.4-14 s and once past 14 s in a full run on 2026-11-28)
)

// ticketStatus is a ticket's status as the API answers it (docs/API.md, "Waiting room").
type ticketStatus struct {
	Ticket        string `json:"ticket"`
	Number        int64  `json:"number"`
	State         string `json:"state"`
	Drawn         bool   `json:"drawn"`
	Position      int64  `json:"position"`
	Ahead         int64  `json:"ahead"`
	ETASeconds    int64  `json:"eta_seconds"`
	Remaining     int64  `json:"remaining"`
	Pass          string `json:"pass"`
	PassExpiresAt string `json:"pass_expires_at"`
	PollAfterMS   int64  `json:"poll_after_ms"`
}

// roomItem creates an item with a waiting room through the API.
func roomItem(t *testing.T, c *apptest.Client, name string, cents, stock int64, starts *time.Time, room map[string]any) int64 {
	t.Helper()
	body := map[string]any{"name": name, "stock": stock, "price_cents": cents, "strategy": "lua", "waiting_room": room}
	if starts != nil {
		body["starts_at"] = starts.UTC().Format(time.RFC3339)
	}
	r := c.Must(t, "POST", "/api/v1/admin/items", body, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: got %d %s, want 201", name, r.Status, r.Body)
	}
	var it apptest.Item
	r.JSON(t, &it)
	return it.ID
}

// joinQueue joins an item's queue through the API.
func joinQueue(t *testing.T, c *apptest.Client, id int64, user string) ticketStatus {
	t.Helper()
	r := c.Must(t, "POST", fmt.Sprintf("/api/v1/items/%d/queue", id), map[string]string{"user_id": user}, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("join as %s: got %d %s, want 200", user, r.Status, r.Body)
	}
	var st ticketStatus
	r.JSON(t, &st)
	return st
}

// queueStatus reads a ticket's status through the API.
func queueStatus(t *testing.T, c *apptest.Client, id int64, ticket string) ticketStatus {
	t.Helper()
	r := c.Must(t, "GET", fmt.Sprintf("/api/v1/items/%d/queue/%s", id, ticket), nil, false, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status of a ticket: got %d %s, want 200", r.Status, r.Body)
	}
	var st ticketStatus
	r.JSON(t, &st)
	return st
}

// storedTicket is the ticket a tab keeps for an item (session storage).
func storedTicket(tb *tab, id int64) struct{ Ticket, User string } {
	tb.t.Helper()
	var v struct{ Ticket, User string }
	tb.eval(fmt.Sprintf(`JSON.parse(sessionStorage.getItem("seckill.ticket.%d") || "{}")`, id), &v)
	return v
}

func roomState(tb *tab) string {
	tb.t.Helper()
	var s string
	tb.eval(`document.getElementById("room").dataset.state || ""`, &s)
	return s
}

func visible(tb *tab, id string) bool {
	tb.t.Helper()
	var v bool
	tb.eval(fmt.Sprintf(`(e => !!e && !e.hidden && e.getClientRects().length > 0)(document.getElementById(%q))`, id), &v)
	return v
}

// TestSaleWaitingRoomInBrowser is issue 21's "done means", in a real
// browser against the real service, on every backend: two people open the
// sale page of a roomed item (one unit) before the opening, see the
// countdown, join the queue and see they are in it (a reload keeps the
// place); at the opening the draw admits one of them, whose page turns into
// the Buy button with the pass's countdown; one click buys; the other, next
// in line, is told it is sold out for now (held) until the winner pays, then
// sold out. The draw the service publishes matches.
func TestSaleWaitingRoomInBrowser(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel()
		_, c := apptest.Start(t, b)
		starts := time.Now().Add(beforeStart).Truncate(time.Second)
		id := roomItem(t, c, camera.name, 699000, 1, &starts,
			map[string]any{"admit_per_second": 5, "pass_ttl_seconds": 60, "lottery": true})

		tabs := make([]*tab, len(queuers))
		for i, user := range queuers {
			tb := br.tab(t)
			tabs[i] = tb
			tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
			tb.wait("the waiting room", `!document.getElementById("room").hidden && document.getElementById("room").dataset.state === "none"`)
			if got := tb.text("#name"); got != camera.name {
				t.Errorf("name: got %q, want %q", got, camera.name)
			}
			if got := tb.text("#price"); got != camera.price {
				t.Errorf("price: got %q, want %q", got, camera.price)
			}
			if got := tb.text("#countdown"); !strings.HasPrefix(got, "Starts in ") {
				t.Errorf("countdown before the opening: got %q, want Starts in …", got)
			}
			if !visible(tb, "join") || visible(tb, "buy") {
				t.Errorf("before joining: Join the queue shown %v, Buy shown %v; want only Join", visible(tb, "join"), visible(tb, "buy"))
			}
			if got := tb.text("#room-note"); !strings.Contains(got, "random order") {
				t.Errorf("room note: got %q, want the draw explained", got)
			}
			tb.do("join as "+user, keys("#user-id", user), click("#join"))
			tb.wait(user+" in the pre-queue", `document.getElementById("room").dataset.state === "pre"`)
			if got := tb.text("#room-state"); !strings.Contains(got, "You are in the queue, ticket ") || !strings.Contains(got, "draw") {
				t.Errorf("%s's place before the opening: got %q", user, got)
			}
			if got := tb.text("#q-eta"); got != "after the draw" {
				t.Errorf("%s's ETA before the draw: got %q", user, got)
			}
			if visible(tb, "join") || visible(tb, "buy") {
				t.Errorf("%s in the queue: Join shown %v, Buy shown %v; want neither", user, visible(tb, "join"), visible(tb, "buy"))
			}
		}

		// The tickets are kept in each tab, and a reload keeps the place.
		tickets := make([]ticketStatus, len(queuers))
		for i, tb := range tabs {
			s := storedTicket(tb, id)
			if s.User != queuers[i] || s.Ticket == "" {
				t.Fatalf("stored ticket of %s: got %+v", queuers[i], s)
			}
			tickets[i] = queueStatus(t, c, id, s.Ticket)
			if tickets[i].State != "waiting" || tickets[i].Drawn {
				t.Errorf("%s's ticket before the opening: got %+v, want waiting, not drawn", queuers[i], tickets[i])
			}
		}
		second := tabs[1]
		before := second.text("#room-state")
		second.do("reload", chromedp.Reload())
		second.wait("the place after a reload", `document.getElementById("room").dataset.state === "pre"`)
		if got := second.text("#room-state"); got != before {
			t.Errorf("after a reload: got %q, want the same place %q", got, before)
		}
		var field struct {
			Value    string
			ReadOnly bool
		}
		second.eval(`({value: document.getElementById("user-id").value, readOnly: document.getElementById("user-id").readOnly})`, &field)
		if field.Value != queuers[1] || !field.ReadOnly {
			t.Errorf("user id after a reload: got %+v, want %s, read-only", field, queuers[1])
		}
		t.Logf("the joins took %v; the opening was %v later", time.Since(starts.Add(-beforeStart)).Round(time.Millisecond), time.Until(starts).Round(time.Millisecond))
		if time.Now().After(starts) {
			t.Fatalf("the joins took past the opening (%v); the draw was not tested", beforeStart)
		}

		// The opening: the draw admits one of the two (one unit: one live
		// pass at a time).
		for _, tb := range tabs {
			tb.do("watch", chromedp.Evaluate[chromedp.Void](`window.states = [];
				new MutationObserver(() => states.push(document.getElementById("room").dataset.state))
					.observe(document.getElementById("room"), {attributes: true, attributeFilter: ["data-state"]});`))
		}
		tabs[0].waitUpTo("the opening", `document.getElementById("room").dataset.state !== "pre"`, beforeStart+20*time.Second)
		win, lose := -1, -1
		for deadline := time.Now().Add(20 * time.Second); win < 0; time.Sleep(50 * time.Millisecond) {
			for i, tb := range tabs {
				if roomState(tb) == "admitted" {
					win, lose = i, 1-i
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("nobody admitted: states %q and %q", roomState(tabs[0]), roomState(tabs[1]))
			}
		}
		winner, loser := tabs[win], tabs[lose]
		winner.wait("the pass's countdown", `document.getElementById("pass-expiry").textContent.startsWith("Your pass is good for")`)
		if got := winner.text("#room-state"); got != "It's your turn! Buy now, before your pass runs out." {
			t.Errorf("admitted: got %q", got)
		}
		if !visible(winner, "buy") || visible(winner, "join") {
			t.Errorf("admitted: Buy shown %v, Join shown %v; want only Buy", visible(winner, "buy"), visible(winner, "join"))
		}
		if got := winner.text("#countdown"); got != "On sale now." {
			t.Errorf("countdown after the opening: got %q", got)
		}
		loser.wait("the next in line", `document.getElementById("room").dataset.state === "waiting" && document.getElementById("q-position").textContent === "1"`)
		if got := loser.text("#q-ahead"); got != "0" {
			t.Errorf("people ahead of the next in line: got %q, want 0", got)
		}

		// The draw is public, and it is the order served.
		var draw struct {
			Commitment string  `json:"commitment"`
			Seed       *string `json:"seed"`
			PreQueue   []int64 `json:"pre_queue"`
			Served     []int64 `json:"served"`
		}
		c.Must(t, "GET", fmt.Sprintf("/api/v1/items/%d/draw", id), nil, false, nil).JSON(t, &draw)
		slices.Sort(draw.PreQueue)
		if want := []int64{min(tickets[0].Number, tickets[1].Number), max(tickets[0].Number, tickets[1].Number)}; !slices.Equal(draw.PreQueue, want) {
			t.Errorf("draw pre-queue: got %v, want %v", draw.PreQueue, want)
		}
		if len(draw.Served) != 1 || draw.Served[0] != tickets[win].Number || draw.Seed == nil {
			t.Errorf("draw: served %v, seed %v; want the winner's ticket %d served first and the seed revealed", draw.Served, draw.Seed, tickets[win].Number)
		}

		// One click buys, with the pass.
		winner.do("buy", click("#buy"))
		winner.wait("the order", `document.getElementById("result").dataset.outcome === "created"`)
		if got := winner.text("#result"); !strings.Contains(got, "It's yours!") || !strings.Contains(got, "for "+queuers[win]+".") {
			t.Errorf("the buy: got %q", got)
		}
		winner.wait("the pass used", `document.getElementById("room").dataset.state === "used"`)
		// Everyone behind is told at once that it is sold out for now: the
		// winner has not paid, so the unit may still come back, and the page
		// keeps polling.
		loser.wait("held", `document.getElementById("room").dataset.state === "held"`)
		if got := loser.text("#room-state"); !strings.Contains(got, "Sold out for now") {
			t.Errorf("behind an unpaid last unit: got %q, want sold out for now", got)
		}
		// Once the winner pays, no unit can come back: a final sold out.
		var orderID string
		if err := b.DB(t).Raw("SELECT id FROM orders WHERE item_id = ?", id).Scan(&orderID).Error; err != nil || orderID == "" {
			t.Fatalf("the winner's order: %q, %v", orderID, err)
		}
		if r := c.Must(t, "POST", "/api/v1/orders/"+orderID+"/pay", map[string]string{"user_id": queuers[win]}, false, nil); r.Status != 200 {
			t.Fatalf("the winner pays: %d %s", r.Status, r.Body)
		}
		loser.wait("sold out", `document.getElementById("room").dataset.state === "sold_out" && document.getElementById("result").dataset.outcome === "sold_out"`)
		if got := loser.text("#result"); !strings.Contains(got, "sold out") {
			t.Errorf("behind the last unit: got %q, want sold out", got)
		}
		if got := loser.text("#remaining"); got != "0" {
			t.Errorf("remaining shown behind the last unit: got %q, want 0", got)
		}
		if visible(loser, "buy") || visible(loser, "join") {
			t.Errorf("sold out: Buy shown %v, Join shown %v; want neither", visible(loser, "buy"), visible(loser, "join"))
		}
		var seen []string
		loser.eval(`states`, &seen)
		if slices.Contains(seen, "admitted") {
			t.Errorf("the next in line was admitted with no unit left: states %v", seen)
		}
		// Someone who comes late cannot join: it is sold out.
		late := br.tab(t)
		late.do("open the sale page late", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
		late.wait("the item, sold out", `document.getElementById("remaining").textContent === "0" && document.getElementById("room").dataset.state === "none"`)
		late.do("join late", keys("#user-id", "liu.yang"), click("#join"))
		late.wait("the refusal", `document.getElementById("result").dataset.outcome === "sold_out"`)
		if got := late.text("#result"); !strings.Contains(got, "sold out") {
			t.Errorf("a late join: got %q, want sold out", got)
		}
		tabs = append(tabs, late)
		if it := c.AdminItem(t, id); it.Sold != 1 || it.Remaining != 0 {
			t.Errorf("after the sale: sold %d remaining %d, want 1 and 0", it.Sold, it.Remaining)
		}
		for _, tb := range tabs {
			tb.clean()
		}
	})
}

// TestSaleWaitingRoomInLine: someone who joins behind a crowd sees their
// place, the people ahead and an ETA, and sees them go down as the room lets
// people in. It makes the README's screenshot of the sale page in line.
func TestSaleWaitingRoomInLine(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t))
	id := roomItem(t, c, "Apple iPhone 16 Pro 256GB", 899900, 500, nil,
		map[string]any{"admit_per_second": 2, "pass_ttl_seconds": 120, "lottery": true})
	const crowd = 150
	for i := range crowd {
		joinQueue(t, c, id, fmt.Sprintf("fan-%03d", i))
	}
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.EmulateViewport(390, 844), chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the waiting room", `document.getElementById("room").dataset.state === "none"`)
	if got := tb.text("#countdown"); got != "On sale now." {
		t.Errorf("countdown: got %q, want On sale now.", got)
	}
	tb.do("join", keys("#user-id", "chen.jie"), click("#join"))
	tb.wait("a place in line", `document.getElementById("room").dataset.state === "waiting" && /^[0-9]+$/.test(document.getElementById("q-position").textContent)`)
	var place struct {
		Position, Ahead, ETA string
	}
	tb.eval(`({position: document.getElementById("q-position").textContent, ahead: document.getElementById("q-ahead").textContent, eta: document.getElementById("q-eta").textContent})`, &place)
	var pos int
	if _, err := fmt.Sscan(place.Position, &pos); err != nil || pos < 2 || pos > crowd+1 {
		t.Fatalf("place: got %q, want 2 to %d", place.Position, crowd+1)
	}
	if want := fmt.Sprint(pos - 1); place.Ahead != want {
		t.Errorf("people ahead: got %q, want %q", place.Ahead, want)
	}
	if !strings.HasPrefix(place.ETA, "about ") && place.ETA != "not known yet" {
		t.Errorf("ETA: got %q, want about … (or not known yet)", place.ETA)
	}
	if got := tb.text("#remaining"); got != "500" {
		t.Errorf("remaining: got %q, want 500", got)
	}
	// The line moves: the page follows it.
	tb.waitUpTo("the line to move", fmt.Sprintf(`parseInt(document.getElementById("q-position").textContent, 10) < %d`, pos), 20*time.Second)
	tb.wait("an ETA", `document.getElementById("q-eta").textContent.startsWith("about ")`)
	tb.screenshot("sale-room.png")
	tb.clean()
}
