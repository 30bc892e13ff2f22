package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

const jwtSecret = "jwt-secret-for-browser-tests-0123456789"

// TestSalePageUserTokens: in JWT mode the sale page asks for a user token
// and sends it as a bearer token; a refused token and a rate limit are told
// in words.
func TestSalePageUserTokens(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) {
		cfg.UserJWTSecret = jwtSecret
		cfg.RateUser = "1/m" // a second try by one user within the minute is 429
	})
	it := c.CreateItem(t, 5, "lua")
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256,
		jwt.MapClaims{"sub": "tokenuser", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	tb := br.tab(t)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, it.ID)))
	tb.wait("the item", `document.getElementById("remaining").textContent === "5"`)
	var fields struct{ UserID, Token bool }
	tb.eval(`({userID: !document.getElementById("user-id-field").hidden, token: !document.getElementById("user-token-field").hidden})`, &fields)
	if fields.UserID || !fields.Token {
		t.Errorf("fields shown: got %+v, want the token field only", fields)
	}

	buy := func(token, outcome string) string {
		t.Helper()
		tb.do("buy", chromedp.Evaluate[chromedp.Void](`document.getElementById("result").dataset.outcome = ""`),
			clearValue("#user-token"), paste("#user-token", token), click("#buy"))
		tb.wait("the answer", `(o => o && o !== "sending")(document.getElementById("result").dataset.outcome)`)
		var got string
		tb.eval(`document.getElementById("result").dataset.outcome`, &got)
		if got != outcome {
			t.Errorf("buy: got %s %q, want %s", got, tb.text("#result"), outcome)
		}
		return tb.text("#result")
	}
	if got := buy("not-a-token", "unauthorized"); !strings.Contains(got, "Your user token was refused") {
		t.Errorf("bad token: got %q", got)
	}
	if got := buy(signed, "created"); !strings.Contains(got, "for tokenuser") {
		t.Errorf("buy with a token: got %q, want the order of tokenuser", got)
	}
	if got := buy(signed, "rate_limited"); !strings.Contains(got, "Too many tries") || !strings.Contains(got, "Please wait") {
		t.Errorf("second try within the limit: got %q, want to be told to wait", got)
	}
	if got := c.AdminItem(t, it.ID); got.Sold != 1 {
		t.Errorf("sold: got %d, want 1", got.Sold)
	}
	tb.clean()
}

// TestPagesEnforceCSP: the Content-Security-Policy is in force in the
// browser: a script injected inline does not run, and the browser reports
// the violation.
func TestPagesEnforceCSP(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	_, c := apptest.Start(t, testenv.Embedded(t))
	for _, path := range []string{"/admin/", "/sale/1"} {
		t.Run(strings.Trim(path, "/"), func(t *testing.T) {
			tb := br.tab(t)
			tb.do("open "+path, chromedp.Navigate(c.Base+path))
			tb.wait("the page's script", `typeof seckill === "object"`)
			tb.do("inject", chromedp.Evaluate[chromedp.Void](`
				const s = document.createElement("script");
				s.textContent = "window.injected = true";
				document.body.append(s);
				const d = document.createElement("div");
				d.setAttribute("onclick", "window.injected = true");
				document.body.append(d);
				d.click();`))
			var ran bool
			tb.eval(`window.injected === true`, &ran)
			if ran {
				t.Errorf("%s: an inline script ran despite the policy", path)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !tb.reported("Content Security Policy") {
				if time.Now().After(deadline) {
					t.Fatalf("%s: no Content-Security-Policy violation reported", path)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// The sale-page steps of TestConsoleInBrowser (console_test.go) follow.

// buyOut buys the phone's last units on the sale page, one for each of
// buyers, then is told in words that it is already bought and sold out.
func buyOut(t *testing.T, tb *tab, c *apptest.Client, id int64) {
	t.Helper()
	tb.do("open the sale page", chromedp.EmulateViewport(390, 844), chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	left := len(buyers)
	tb.wait("the item", fmt.Sprintf(`document.getElementById("remaining").textContent === "%d"`, left))
	if got := tb.text("#name"); got != phone.name {
		t.Errorf("sale page name: got %q, want %q", got, phone.name)
	}
	// The page's locale is en-US (browser.tab), whatever the machine's.
	if got := tb.text("#price"); got != "Price: 4,999.00" {
		t.Errorf("price: got %q, want Price: 4,999.00", got)
	}
	if got := tb.text("#countdown"); got != "On sale now." {
		t.Errorf("countdown: got %q, want On sale now.", got)
	}
	buy := func(user, outcome string) string {
		t.Helper()
		tb.do("buy as "+user, chromedp.Evaluate[chromedp.Void](`document.getElementById("result").dataset.outcome = ""`),
			clearValue("#user-id"), keys("#user-id", user), click("#buy"))
		tb.wait(user+"'s answer", `(o => o && o !== "sending" && o !== "queued")(document.getElementById("result").dataset.outcome)`)
		got := tb.text("#result")
		var o string
		tb.eval(`document.getElementById("result").dataset.outcome`, &o)
		if o != outcome {
			t.Errorf("buy as %s: got %s %q, want %s", user, o, got, outcome)
		}
		return got
	}
	first := buyers[0]
	if got := buy(first, "created"); !strings.Contains(got, "It's yours!") || !strings.Contains(got, "for "+first+".") {
		t.Errorf("first buy: got %q, want It's yours! and the order", got)
	}
	tb.wait(fmt.Sprintf("%d left", left-1), fmt.Sprintf(`document.getElementById("remaining").textContent === "%d"`, left-1))
	tb.screenshot("sale.png")
	if got := buy(first, "already_purchased"); !strings.Contains(got, "already bought this item") {
		t.Errorf("second buy by %s: got %q, want the already-bought words", first, got)
	}
	for _, user := range buyers[1:] {
		buy(user, "created")
	}
	if got := buy("liu.yang", "sold_out"); !strings.Contains(got, "sold out") {
		t.Errorf("buy after the last unit: got %q, want the sold-out words", got)
	}
	tb.wait("none left", `document.getElementById("remaining").textContent === "0"`)
	if it := c.AdminItem(t, id); it.Sold != phoneStock || it.Remaining != 0 {
		t.Errorf("after the sale: got sold %d remaining %d, want %d and 0", it.Sold, it.Remaining, phoneStock)
	}
}

// buyQueued buys a lua-async item on the sale page: 202, "queued", then the
// page follows the order until it is created.
func buyQueued(t *testing.T, tb *tab, c *apptest.Client, id int64) {
	t.Helper()
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
	tb.wait("the item", `document.getElementById("remaining").textContent !== "–"`)
	// Record every outcome the page shows, to see "queued" go by.
	tb.do("watch outcomes", chromedp.Evaluate[chromedp.Void](`window.outcomes = [];
		new MutationObserver(() => outcomes.push(document.getElementById("result").dataset.outcome))
			.observe(document.getElementById("result"), {attributes: true, attributeFilter: ["data-outcome"]});`),
		keys("#user-id", "queued-buyer"), click("#buy"))
	tb.wait("the order written", `document.getElementById("result").dataset.outcome === "created"`)
	var seen []string
	tb.eval(`outcomes`, &seen)
	if strings.Join(seen, ",") != "sending,queued,created" {
		t.Errorf("outcomes shown: got %v, want sending, queued, created", seen)
	}
	if got := tb.text("#result"); !strings.Contains(got, "It's yours!") || !strings.Contains(got, "for queued-buyer") {
		t.Errorf("queued buy: got %q", got)
	}
}

// buyFailed: a lua-async order the database refuses after its 202 (the
// stock was taken away behind the gate's back, as after Redis lost data) is
// shown as failed, not as bought.
func buyFailed(t *testing.T, tb *tab, c *apptest.Client, b testenv.Backend) {
	t.Helper()
	it := c.CreateItem(t, 5, "lua-async")
	if err := b.DB(t).Exec("UPDATE items SET stock = 0 WHERE id = ?", it.ID).Error; err != nil {
		t.Fatal(err)
	}
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, it.ID)))
	// The public view counts from the gate, which still has the 5 units
	// the database no longer has: that is what the buyer races for.
	tb.wait("the item", `document.getElementById("remaining").textContent === "5"`)
	tb.do("buy", keys("#user-id", "unlucky"), click("#buy"))
	tb.wait("the failure", `document.getElementById("result").dataset.outcome === "failed"`)
	if got := tb.text("#result"); !strings.Contains(got, "Your order failed.") || !strings.Contains(got, "could not be recorded. Sorry, it is sold out") {
		t.Errorf("failed order: got %q, want the failure and its reason", got)
	}
}

// ended shows an ended sale as such, and refuses a buy in words.
func ended(t *testing.T, tb *tab, c *apptest.Client) {
	t.Helper()
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "over", "stock": 1,
		"starts_at": time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339),
		"ends_at":   time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, true, nil)
	var it apptest.Item
	r.JSON(t, &it)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, it.ID)))
	tb.wait("the end", `document.getElementById("countdown").dataset.phase === "ended"`)
	if got := tb.text("#countdown"); !strings.HasPrefix(got, "The sale ended on ") {
		t.Errorf("countdown: got %q, want The sale ended on …", got)
	}
	tb.do("buy late", keys("#user-id", "late"), click("#buy"))
	tb.wait("the refusal", `document.getElementById("result").dataset.outcome === "sale_ended"`)
	if got := tb.text("#result"); !strings.Contains(got, "The sale has ended") {
		t.Errorf("late buy: got %q", got)
	}
}

// notStarted shows the countdown of an upcoming sale and the refusal of an
// early buy in words.
func notStarted(t *testing.T, tb *tab, c *apptest.Client) {
	t.Helper()
	starts := time.Now().Add(90 * time.Minute).UTC().Format(time.RFC3339)
	r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "later", "stock": 1, "starts_at": starts}, true, nil)
	var it apptest.Item
	r.JSON(t, &it)
	tb.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, it.ID)))
	tb.wait("the countdown", `document.getElementById("countdown").dataset.phase === "upcoming"`)
	if got := tb.text("#countdown"); !strings.HasPrefix(got, "Starts in 1h 29m") {
		t.Errorf("countdown: got %q, want Starts in 1h 29m…", got)
	}
	tb.do("buy early", keys("#user-id", "early"), click("#buy"))
	tb.wait("the refusal", `document.getElementById("result").dataset.outcome === "sale_not_started"`)
	if got := tb.text("#result"); !strings.Contains(got, "The sale has not started yet") {
		t.Errorf("early buy: got %q", got)
	}
}
