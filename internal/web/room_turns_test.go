package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The waiting room's turns on the sale page that TestSaleWaitingRoomInBrowser
// does not take: a pass left to expire, an outage, token mode.

// TestSaleWaitingRoomPassExpires: an admitted buyer who does not buy sees
// the pass count down, then that the turn has passed; the Buy button goes.
func TestSaleWaitingRoomPassExpires(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t))
	id := roomItem(t, c, "Fujifilm X100VI", 159900, 3, nil,
		map[string]any{"admit_per_second": 10, "pass_ttl_seconds": 5, "lottery": false})
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the waiting room", `document.getElementById("room").dataset.state === "none"`)
	if got := tb.text("#room-note"); !strings.Contains(got, "in the order they joined") {
		t.Errorf("room note without a draw: got %q", got)
	}
	tb.do("join", keys("#user-id", "wang.fang"), click("#join"))
	tb.wait("the turn", `document.getElementById("room").dataset.state === "admitted"`)
	tb.wait("the pass's countdown", `/^Your pass is good for [0-9]s more/.test(document.getElementById("pass-expiry").textContent)`)
	tb.waitUpTo("the pass to expire", `document.getElementById("room").dataset.state === "expired"`, 20*time.Second)
	if got := tb.text("#result"); !strings.Contains(got, "Your pass expired before you bought.") {
		t.Errorf("after the pass expired: got %q", got)
	}
	if visible(tb, "buy") || visible(tb, "join") || visible(tb, "pass-expiry") {
		t.Errorf("expired: Buy shown %v, Join shown %v, pass shown %v; want none", visible(tb, "buy"), visible(tb, "join"), visible(tb, "pass-expiry"))
	}
	if it := c.AdminItem(t, id); it.Sold != 0 {
		t.Errorf("sold: got %d, want 0", it.Sold)
	}
	tb.clean()
}

// TestSaleWaitingRoomOutage: while Redis fails, a join is refused in words
// (nothing joined, try again) and the page's polling says it could not
// read the place and keeps it; once Redis is back the page carries on, the
// buyer is let in when admission resumes, and buys.
func TestSaleWaitingRoomOutage(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	b := testenv.Embedded(t)
	_, c := apptest.Start(t, b)
	id := roomItem(t, c, "Nintendo Switch 2", 46999, 2, nil,
		map[string]any{"admit_per_second": 10, "pass_ttl_seconds": 60, "lottery": false})
	pause := func(paused bool) {
		t.Helper()
		r := c.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id), map[string]any{"paused": paused}, true, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("pause %v: got %d %s, want 200", paused, r.Status, r.Body)
		}
	}
	pause(true)
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the waiting room", `document.getElementById("room").dataset.state === "none"`)

	b.Mini.SetError("ERR the test's Redis outage")
	tb.do("join during the outage", keys("#user-id", "zhao.lei"), click("#join"))
	tb.wait("the refusal", `document.getElementById("result").dataset.outcome === "unavailable"`)
	if got := tb.text("#result"); !strings.Contains(got, "The queue is busy right now.") || !strings.Contains(got, "You have not joined yet") {
		t.Errorf("join during an outage: got %q", got)
	}
	if got := roomState(tb); got != "none" || !visible(tb, "join") {
		t.Errorf("after a refused join: room state %q, Join shown %v; want none and the button", got, visible(tb, "join"))
	}
	b.Mini.SetError("")
	tb.do("join again", click("#join"))
	tb.wait("in line", `document.getElementById("room").dataset.state === "waiting"`)
	if got := tb.text("#result"); got != "" {
		t.Errorf("after joining: result %q, want none", got)
	}

	b.Mini.SetError("ERR the test's Redis outage")
	tb.wait("the polling's trouble", `document.getElementById("room-state").dataset.problem === "true"`)
	if got := tb.text("#room-state"); !strings.Contains(got, "Your place could not be read just now") || !strings.Contains(got, "Your place is kept.") {
		t.Errorf("polling during an outage: got %q", got)
	}
	b.Mini.SetError("")
	tb.wait("back in line", `document.getElementById("room").dataset.state === "waiting" && !document.getElementById("room-state").dataset.problem`)

	pause(false)
	tb.wait("the turn", `document.getElementById("room").dataset.state === "admitted"`)
	tb.do("buy", click("#buy"))
	tb.wait("the order", `document.getElementById("result").dataset.outcome === "created"`)
	if got := tb.text("#result"); !strings.Contains(got, "for zhao.lei.") {
		t.Errorf("the buy: got %q", got)
	}
	tb.clean()
}

// TestSaleWaitingRoomUserToken: in JWT mode the page joins the queue with
// the user's token (kept nowhere but the field) and buys with it and the
// pass; a buy with another user's token is refused in words.
func TestSaleWaitingRoomUserToken(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.UserJWTSecret = jwtSecret })
	id := roomItem(t, c, "DJI Mini 4 Pro", 75900, 5, nil,
		map[string]any{"admit_per_second": 10, "pass_ttl_seconds": 60, "lottery": true})
	token := func(user string) string {
		t.Helper()
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256,
			jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	signed, other := token("tokenuser"), token("otheruser")
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the waiting room", `document.getElementById("room").dataset.state === "none"`)
	tb.do("join with a bad token", keys("#user-token", "not-a-token"), click("#join"))
	tb.wait("the refusal", `document.getElementById("result").dataset.outcome === "unauthorized"`)
	tb.do("join", clearValue("#user-token"), paste("#user-token", signed), click("#join"))
	tb.wait("the turn", `document.getElementById("room").dataset.state === "admitted"`)
	// Buying with another user's token: the pass is not theirs.
	tb.do("buy as someone else", clearValue("#user-token"), paste("#user-token", other), click("#buy"))
	tb.wait("the refusal", `document.getElementById("result").dataset.outcome === "pass_wrong_user"`)
	if got := tb.text("#result"); !strings.Contains(got, "Your pass belongs to another user.") {
		t.Errorf("another user's buy: got %q", got)
	}
	if it := c.AdminItem(t, id); it.Sold != 0 {
		t.Errorf("sold after the refusal: got %d, want 0", it.Sold)
	}
	tb.do("buy", clearValue("#user-token"), paste("#user-token", signed), click("#buy"))
	tb.wait("the order", `document.getElementById("result").dataset.outcome === "created"`)
	if got := tb.text("#result"); !strings.Contains(got, "for tokenuser.") {
		t.Errorf("the buy: got %q", got)
	}
	var storage string
	tb.eval(`JSON.stringify(Object.assign({}, sessionStorage, localStorage))`, &storage)
	if strings.Contains(storage, signed) {
		t.Errorf("the user token is in the page's storage: %s", storage)
	}
	tb.clean()
}

// TestSaleWaitingRoomProofOfWork: with proof-of-work on, the page's join is
// refused (403 pow_required), so the page fetches a challenge, loads the
// solver, solves it, and joins; the buyer is let in and buys.
func TestSaleWaitingRoomProofOfWork(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.RoomPoWBits = 10 })
	id := roomItem(t, c, "Sony PlayStation 5 Pro", 69999, 5, nil,
		map[string]any{"admit_per_second": 10, "pass_ttl_seconds": 60, "lottery": true})
	// Proof-of-work is on: a join without one is refused.
	if r := c.Must(t, "POST", fmt.Sprintf("/api/v1/items/%d/queue", id), map[string]string{"user_id": "no.puzzle"}, false, nil); r.Status != http.StatusForbidden || r.ErrorCode() != "pow_required" {
		t.Fatalf("join without a proof-of-work: got %d %s, want 403 pow_required", r.Status, r.Body)
	}
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the waiting room", `document.getElementById("room").dataset.state === "none"`)
	var loaded bool
	tb.eval(`typeof seckillPoW !== "undefined"`, &loaded)
	if loaded {
		t.Error("the solver is loaded before any join asked for it")
	}
	tb.do("watch", chromedp.Evaluate[chromedp.Void](`window.said = [];
		new MutationObserver(() => said.push(document.getElementById("result").textContent))
			.observe(document.getElementById("result"), {childList: true, subtree: true});`),
		keys("#user-id", "zhou.min"), click("#join"))
	tb.wait("the turn", `document.getElementById("room").dataset.state === "admitted"`)
	var said []string
	tb.eval(`said`, &said)
	if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "solving a small puzzle") }) {
		t.Errorf("the page did not say it was solving the puzzle: %q", said)
	}
	tb.eval(`typeof seckillPoW === "object"`, &loaded)
	if !loaded {
		t.Error("the solver was not loaded")
	}
	tb.do("buy", click("#buy"))
	tb.wait("the order", `document.getElementById("result").dataset.outcome === "created"`)
	if got := tb.text("#result"); !strings.Contains(got, "for zhou.min.") {
		t.Errorf("the buy: got %q", got)
	}
	tb.clean()
}
