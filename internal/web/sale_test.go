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
			clearValue("#user-token"), keys("#user-token", token), click("#buy"))
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
