package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/web"
)

// powPage is a test-only page that loads nothing but the solver; the
// sale page's own use of it belongs to the sale page's tests.
const powPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>pow</title>
<script src="/assets/pow.js"></script></head><body><main>pow</main></body></html>`

// powServer serves powPage and the embedded assets as the service does
// (web.Asset, with the service's Content-Security-Policy).
func powServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pow", func(w http.ResponseWriter, r *http.Request) {
		web.SetHeaders(w.Header())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(powPage))
	})
	mux.HandleFunc("GET /assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		if !web.Asset(w, r, r.PathValue("file")) {
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPoWSolverInBrowser: the page's solver, in a real Chromium under the
// service's CSP, solves challenges issued by the Go code, in a worker and on
// the page, and the Go verifier accepts each nonce; an abort stops it.
func TestPoWSolverInBrowser(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	base := powServer(t)
	key := room.GeneratePassKey()
	const bits = 12
	tb := br.tab(t)
	tb.do("open the test page", chromedp.Navigate(base+"/pow"))
	tb.wait("the solver", `typeof seckillPoW === "object"`)

	solveIn := func(mode string, user string) {
		t.Helper()
		now := time.Now()
		c, _, err := room.IssueChallenge(key, 7, user, bits, now)
		if err != nil {
			t.Fatal(err)
		}
		opts := "{}"
		if mode == "page" {
			opts = "{worker: false}"
		}
		var got struct {
			Nonce, Mode string
			Progress    int
		}
		tb.evalAwait(fmt.Sprintf(`(async () => {
			let progress = 0;
			const opts = Object.assign(%s, {onProgress: (n) => { progress = n; }});
			const nonce = await seckillPoW.solve(%s, %d, opts);
			return {nonce, mode: seckillPoW.lastMode, progress};
		})()`, opts, js(c), bits), &got)
		if got.Mode != mode {
			t.Errorf("%s: solved in %q, want %q", mode, got.Mode, mode)
		}
		if err := room.VerifyPoW(key, c, got.Nonce, 7, user, bits, now); err != nil {
			t.Errorf("%s: the browser's nonce %q is refused: %v (zero bits: %d)", mode, got.Nonce, err, room.PoWZeroBits(c, got.Nonce))
		}
		// The solver tries 0, 1, 2…: its nonce is the first that works.
		if want := room.SolvePoW(c, bits); got.Nonce != want {
			t.Errorf("%s: the browser answered %s, but %s is the first nonce that works", mode, got.Nonce, want)
		}
		t.Logf("%s: nonce %s (%d tried before the last batch)", mode, got.Nonce, got.Progress)
	}
	solveIn("worker", "alice")
	solveIn("page", "bob")

	// Abort: 32 bits takes hours; it stops once told, in either place.
	for _, opts := range []string{"{}", "{worker: false}"} {
		var got string
		tb.evalAwait(fmt.Sprintf(`(async () => {
			const ac = new AbortController();
			const opts = Object.assign(%s, {signal: ac.signal, onProgress: () => ac.abort()});
			try {
				await seckillPoW.solve("x", 32, opts);
				return "solved";
			} catch (err) {
				return err.name;
			}
		})()`, opts), &got)
		if got != "AbortError" {
			t.Errorf("abort with %s: got %q, want AbortError", opts, got)
		}
	}
	var refused []string
	tb.evalAwait(`Promise.all([["", 8], ["c", 33], ["c", 1.5], ["c", "8"]].map(
		([c, b]) => seckillPoW.solve(c, b).then(() => "solved", (e) => e.name)))`, &refused)
	if strings.Join(refused, ",") != "TypeError,RangeError,RangeError,RangeError" {
		t.Errorf("bad arguments: got %q, want a TypeError and three RangeErrors", refused)
	}
	tb.clean()
}

// TestPoWJoinInBrowser: against the real service with proof-of-work on, a
// page of the service loads pow.js as the sale page does (a script element
// added at run time, under the CSP), asks the service for a challenge,
// solves it, and joins: the join without a proof was 403 pow_required, the
// solved one is 200 and takes the user's place.
func TestPoWJoinInBrowser(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.RoomPoWBits = 12 })
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "roomed", "stock": 3, "strategy": "lua",
		"waiting_room": map[string]any{"admit_per_second": 100}}, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create a roomed item: %d %s", r.Status, r.Body)
	}
	var it struct{ ID int64 }
	r.JSON(t, &it)

	tb := br.tab(t)
	tb.do("open the index page", chromedp.Navigate(c.Base+"/"))
	var got struct {
		First, Bits, Second       int
		Code, Nonce, Ticket, Mode string
	}
	tb.evalAwait(fmt.Sprintf(`(async () => {
		const path = "/api/v1/items/%d/queue";
		const post = (body) => fetch(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
		const first = await post({user_id: "zoe"});
		const code = (await first.json()).error.code;
		await new Promise((ok, fail) => {
			const s = document.createElement("script");
			s.src = "/assets/pow.js";
			s.onload = ok;
			s.onerror = fail;
			document.head.append(s);
		});
		const ch = await (await fetch(path + "/challenge?user_id=zoe")).json();
		const nonce = await seckillPoW.solve(ch.challenge, ch.bits);
		const second = await post({user_id: "zoe", pow: {challenge: ch.challenge, nonce}});
		const ticket = (await second.json()).ticket;
		return {first: first.status, code, bits: ch.bits, nonce, second: second.status, ticket, mode: seckillPoW.lastMode};
	})()`, it.ID), &got)
	if got.First != http.StatusForbidden || got.Code != "pow_required" {
		t.Errorf("join without a proof: got %d %s, want 403 pow_required", got.First, got.Code)
	}
	if got.Bits != 12 || got.Second != http.StatusOK || got.Ticket == "" {
		t.Errorf("join with the page's proof: got %+v, want 12 bits, 200 and a ticket", got)
	}
	// Loaded by a script element added at run time (as the sale page
	// does), the solver still finds its own URL for the worker.
	if got.Mode != "worker" {
		t.Errorf("solved in %q, want in a worker", got.Mode)
	}
	var wr struct {
		WaitingRoom struct{ Tickets int64 } `json:"waiting_room"`
	}
	c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", it.ID), nil, true, nil).JSON(t, &wr)
	if wr.WaitingRoom.Tickets != 1 {
		t.Errorf("tickets: got %d, want 1 (zoe)", wr.WaitingRoom.Tickets)
	}
	tb.clean()
}

// evalAwait evaluates an expression that yields a promise and decodes what
// it resolves to.
func (tb *tab) evalAwait(expr string, v any) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		tb.t.Fatalf("evaluate %s: %s: %v", expr, raw, err)
	}
}
