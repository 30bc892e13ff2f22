package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/seckill/seckill/internal/testenv"
)

// The browser tests drive the console and the sale page in a real headless
// Chromium (Debian's chromium package; SECKILL_CHROMIUM names another).
// Without it they skip, except under CI=true, where they fail.

// screenshotDir, when set, receives the screenshots of the README
// (SECKILL_SCREENSHOTS=docs/img, relative to the repository root).
func screenshotDir() string {
	dir := os.Getenv("SECKILL_SCREENSHOTS")
	if dir == "" || filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join("..", "..", dir)
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SECKILL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatal("CI=true but no chromium is installed (apt-get install -y chromium, or set SECKILL_CHROMIUM)")
	}
	t.Skip("no chromium installed (apt-get install -y chromium, or set SECKILL_CHROMIUM); set CI=true to make this fail")
	return ""
}

// TestMain runs the package's tests, several at once (they mostly wait on
// pages and on the service), then stops the one Chromium they share.
func TestMain(m *testing.M) {
	code := m.Run()
	chromium.stop()
	os.Exit(code)
}

// chromium is the one headless Chromium of the package, started by the
// first test that needs it: each test has a browser context of its own in
// it (its own cookies and storage), so a start (a second of CPU on a busy
// machine) is paid once, not by each test.
var chromium sharedChromium

type sharedChromium struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab
	cancel []context.CancelFunc
	err    error
}

func (c *sharedChromium) stop() {
	for _, cancel := range c.cancel {
		cancel()
	}
}

// browser is one test's browser context in the shared Chromium; tab opens
// a page in it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	chromium.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		chromium.ctx, chromium.cancel = ctx, []context.CancelFunc{cancel, cancelAlloc}
		chromium.err = chromedp.Do(ctx) // starts the browser
	})
	if chromium.err != nil {
		t.Fatalf("start chromium: %v", chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a browser context: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// tab is one page. It records what the page wrote to the console and every
// JavaScript dialog (an alert is how an injected script would show itself;
// it is dismissed and counted).
type tab struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	dialogs  []string
}

func (b *browser) tab(t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	// Numbers and dates in one locale, whatever the machine's, so the
	// texts the tests check and the screenshots are the same everywhere.
	if _, err := chromedp.Call(ctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "en_US"}); err != nil {
		t.Fatalf("set the locale: %v", err)
	}
	tb := &tab{t: t, ctx: ctx}
	console := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.messages = append(tb.messages, m)
			tb.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tb
}

// clean fails the test if the page opened a dialog, threw, or logged an
// error (a Content-Security-Policy violation is one).
func (tb *tab) clean() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		tb.t.Errorf("JavaScript dialogs opened: %q", tb.dialogs)
	}
	for _, m := range tb.messages {
		// The browser logs each 4xx answer as a network error; the tests
		// cause those on purpose, and check what the page made of them.
		if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
			tb.t.Errorf("page console: %s (source %q, %s:%d)", m, m.Source, m.URL, m.Line)
		}
	}
}

// reported says whether the page's console has a message containing s.
func (tb *tab) reported(s string) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, m := range tb.messages {
		if strings.Contains(m.Text, s) {
			return true
		}
	}
	return false
}

// do runs steps, giving up after a minute: a guard against a hang, not a
// bound (typing a JWT is some 300 key events, one DevTools round trip
// each, and took over 20 s on a loaded day).
func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls a JavaScript expression until it is truthy.
func (tb *tab) wait(what, expr string) {
	tb.t.Helper()
	tb.waitUpTo(what, expr, 20*time.Second)
}

// waitUpTo is wait for an event that may take longer (an opening, a pass
// expiring): it gives up after d.
func (tb *tab) waitUpTo(what, expr string, d time.Duration) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		tb.t.Fatalf("waiting for %s (%s): %v; page says: %q", what, expr, err, tb.text("main"))
	}
}

func (tb *tab) eval(expr string, v any) {
	tb.t.Helper()
	raw, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		tb.t.Fatalf("evaluate %s: %s: %v", expr, raw, err)
	}
}

// text is the textContent of the first element matching a CSS selector
// ("" when none does).
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	var s string
	raw, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]byte](
		fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
	if err == nil {
		_ = json.Unmarshal(raw, &s)
	}
	return strings.Join(strings.Fields(s), " ")
}

// rows is the text of each cell of the rows matching a CSS selector.
func (tb *tab) rows(sel string) [][]string {
	tb.t.Helper()
	var out [][]string
	tb.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => [...r.cells].map(c => c.textContent.trim()))`, sel), &out)
	return out
}

func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := screenshotDir()
	if dir == "" {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("wrote %s", filepath.Join(dir, name))
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// keys types into an input as a person would.
func keys(sel, s string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(sel), s)
}

// paste puts s into a field as a paste does: one insertText, one input
// event. For tokens, which people paste: typing a 150-character token key
// by key is hundreds of round trips to the browser, and took tens of
// seconds a field in a full test run.
func paste(sel, s string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Focus(chromedp.CSS(sel)), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: s})
		return err
	}))
}

func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }

func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// clearValue empties a field (SetValue cannot set "").
func clearValue(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel))
}

var enter = kb.Enter
