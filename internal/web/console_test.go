package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The sale TestConsoleInBrowser runs, which the README's screenshots show:
// two items already selling when the console opens, and a phone created
// through the form, its stock raised, most of it sold through the API and
// the last units on the sale page.
var (
	phone = newItem{name: "Xiaomi 14 Pro 512GB", stock: 100, price: "4999.00", cents: 499900}
	// phoneStock is the phone's stock after the change in the console.
	phoneStock int64 = 120
	// buyers buy the phone's last units on the sale page.
	buyers = []string{"zhang.wei", "li.na", "wang.fang", "chen.jie"}
	// selling are sold in part through the API before the console opens.
	selling = []struct {
		name               string
		cents, stock, sold int64
		strategy           string
	}{
		{"Nintendo Switch OLED", 209900, 200, 137, "lua"},
		{"Sony WH-1000XM5", 229900, 150, 42, "lock"},
	}
)

// TestConsoleInBrowser drives the admin console and the sale page of a real
// service in headless Chromium, on the embedded backend and on MariaDB and
// Redis: sign in, see the items on sale listed, create an item through the
// form, change its stock, buy it out on the sale page while the live view
// counts, requeue a dead letter, and run a reconcile dry run.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel()
		logs := &testenv.SyncBuffer{}
		log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		_, c := apptest.StartLogged(t, b, log, func(cfg *app.Config) {
			cfg.MaxDeliveries = 1 // a refused lua-async order is a dead letter at once
			cfg.RateUser = ""     // several buys by one user are the point here
		})
		onSale := startSelling(t, c)
		console := br.tab(t)
		console.do("open the console", chromedp.Navigate(c.Base+"/admin/"))
		signIn(console, c)
		listsSelling(t, console, onSale)
		id := createThroughForm(t, console, c, phone)
		changeStock(t, console, c, id)
		sell(t, c, id, phoneStock-int64(len(buyers)), "fan")

		sale := br.tab(t)
		buyOut(t, sale, c, id)
		watchLive(t, console, id)
		refuseStockBelowSold(t, console, c, id)
		reconcileDryRun(t, console)
		console.screenshot("console.png")
		repairDrift(t, console, b, id)

		asyncID := requeueDeadLetter(t, console, c, b)
		buyQueued(t, sale, c, asyncID)
		buyFailed(t, sale, c, b)
		notStarted(t, sale, c)
		ended(t, sale, c)
		loadMore(t, console, c)

		// Each change made in the console is in the audit log, as through
		// the API; the token is in no log line.
		audited := map[string]int{}
		for _, line := range strings.Split(logs.String(), "\n") {
			var e struct {
				Msg, Action string
				Item        int64
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "audit" {
				audited[fmt.Sprintf("%s %d", e.Action, e.Item)]++
			}
		}
		for _, want := range []string{fmt.Sprintf("create_item %d", id), fmt.Sprintf("set_stock %d", id),
			fmt.Sprintf("reconcile %d", id), fmt.Sprintf("requeue_dead_letters %d", asyncID)} {
			if audited[want] != 1 {
				t.Errorf("audit log: %d %q, want 1 (all: %v)", audited[want], want, audited)
			}
		}
		if strings.Contains(logs.String(), c.Token) {
			t.Error("the admin token is in the log")
		}

		// On a phone-sized screen nothing is wider than the screen (the
		// tables scroll inside their box).
		for _, tb := range []*tab{console, sale} {
			tb.do("phone size", chromedp.EmulateViewport(390, 844))
			var wide struct{ Page, Screen int }
			tb.eval(`({page: document.documentElement.scrollWidth, screen: window.innerWidth})`, &wide)
			if wide.Page > wide.Screen {
				// The elements past the right edge, to say which.
				var culprits []string
				tb.eval(`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`, &culprits)
				t.Errorf("on a 390px screen the page is %dpx wide: %v", wide.Page, culprits)
			}
		}

		// Nothing the pages showed ran as code, nothing they did broke
		// the Content-Security-Policy, and no script failed.
		for _, tb := range []*tab{console, sale} {
			var imgs int
			tb.eval(`document.querySelectorAll("img").length`, &imgs)
			if imgs != 0 {
				t.Errorf("%d <img> elements on the page, want none (an item name became HTML)", imgs)
			}
			tb.clean()
		}
	})
}

func signIn(tb *tab, c *apptest.Client) {
	t := tb.t
	t.Helper()
	tb.wait("the sign-in form", `!document.getElementById("sign-in").hidden`)
	// A wrong token is refused with a message, and nothing is kept.
	tb.do("sign in with a wrong token", keys("#token", "not-the-token-0123456789"+enter))
	tb.wait("the refusal", `document.getElementById("sign-in-error").textContent.includes("refused")`)
	if !strings.Contains(tb.text("#sign-in-error"), "That token was refused") {
		t.Errorf("wrong token: got %q", tb.text("#sign-in-error"))
	}
	// Signing in by keyboard: type the token and press Enter.
	tb.do("sign in", clearValue("#token"), keys("#token", c.Token+enter))
	tb.wait("the console", `!document.getElementById("console").hidden`)
	var where struct {
		Stored, URL, Cookie string
	}
	tb.eval(`({stored: sessionStorage.getItem("seckill.adminToken"), url: location.href, cookie: document.cookie})`, &where)
	if where.Stored != c.Token {
		t.Errorf("session storage: got %q, want the token", where.Stored)
	}
	if strings.Contains(where.URL, c.Token) || strings.Contains(where.Cookie, c.Token) {
		t.Errorf("the token is in the URL %q or a cookie %q", where.URL, where.Cookie)
	}
}

// startSelling creates the items of selling and sells their units through
// the API; it returns their ids.
func startSelling(t *testing.T, c *apptest.Client) []int64 {
	t.Helper()
	var ids []int64
	for _, s := range selling {
		r := c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": s.name, "stock": s.stock,
			"price_cents": s.cents, "strategy": s.strategy}, true, nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("create %s: got %d %s, want 201", s.name, r.Status, r.Body)
		}
		var it apptest.Item
		r.JSON(t, &it)
		sell(t, c, it.ID, s.sold, "buyer")
		ids = append(ids, it.ID)
	}
	return ids
}

// sell buys n units of an item through the API, each for another user.
func sell(t *testing.T, c *apptest.Client, id, n int64, prefix string) {
	t.Helper()
	for i := range n {
		user := fmt.Sprintf("%s-%d-%04d", prefix, id, i)
		if r, err := c.PlaceOrder(id, user, ""); err != nil || r.Status != http.StatusCreated {
			t.Fatalf("order of %s: got %d %s %v, want 201", user, r.Status, r.Body, err)
		}
	}
}

// listsSelling: the console lists the items on sale with their stock, sold
// units and remaining units.
func listsSelling(t *testing.T, tb *tab, ids []int64) {
	t.Helper()
	for i, s := range selling {
		row := fmt.Sprintf(`#item-rows tr[data-id="%d"]`, ids[i])
		tb.wait(s.name+" in the list", fmt.Sprintf(`document.querySelector(%s)`, js(row)))
		got := tb.rows(row)
		want := []string{s.name, "on sale", fmt.Sprint(s.stock), fmt.Sprint(s.sold), fmt.Sprint(s.stock - s.sold), s.strategy}
		if len(got) != 1 || len(got[0]) < 7 || strings.Join(got[0][1:7], " | ") != strings.Join(want, " | ") {
			t.Errorf("listed %s: got %v, want %v", s.name, got, want)
		}
	}
}

// newItem is what createThroughForm types into the form.
type newItem struct {
	name  string
	stock int64
	price string // as typed
	cents int64  // as the API stores it
}

func createThroughForm(t *testing.T, tb *tab, c *apptest.Client, f newItem) int64 {
	t.Helper()
	tb.do("fill the create form",
		keys("#new-name", f.name), keys("#new-stock", fmt.Sprint(f.stock)), keys("#new-price", f.price),
		chromedp.SetValue(chromedp.CSS("#new-strategy"), "lua"),
		click("#create-form button[type=submit]"))
	tb.wait("the created item's detail", `!document.getElementById("detail").hidden`)
	id, err := strconv.ParseInt(tb.text("#d-id"), 10, 64)
	if err != nil {
		t.Fatalf("detail id %q: %v", tb.text("#d-id"), err)
	}
	var it struct {
		Name       string `json:"name"`
		Stock      int64  `json:"stock"`
		PriceCents int64  `json:"price_cents"`
		Strategy   string `json:"strategy"`
	}
	c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", id), nil, true, nil).JSON(t, &it)
	if it.Name != f.name || it.Stock != f.stock || it.PriceCents != f.cents || it.Strategy != "lua" {
		t.Errorf("created item: got %+v, want %q, stock %d, %d cents, lua", it, f.name, f.stock, f.cents)
	}
	// The list shows it, its name as text.
	row := fmt.Sprintf(`#item-rows tr[data-id="%d"]`, id)
	tb.wait("the item in the list", fmt.Sprintf(`document.querySelector(%s)`, js(row)))
	if got := tb.text(row + " td.name"); got != f.name {
		t.Errorf("listed name: got %q, want %q as text", got, f.name)
	}
	if got := tb.text(row); !strings.Contains(got, "on sale") || !strings.Contains(got, "lua") || !strings.Contains(got, "always open") {
		t.Errorf("listed row: got %q, want on sale, lua, always open", got)
	}
	if got := tb.text("#d-name"); got != f.name {
		t.Errorf("detail name: got %q, want %q as text", got, f.name)
	}
	// The status filter: on sale shows it, ended does not.
	tb.do("filter ended", chromedp.SetValue(chromedp.CSS("#filter"), "ended"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("filter").dispatchEvent(new Event("change"))`))
	tb.wait("the ended filter", fmt.Sprintf(`!document.querySelector(%s)`, js(row)))
	tb.do("filter on sale", chromedp.SetValue(chromedp.CSS("#filter"), "on_sale"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("filter").dispatchEvent(new Event("change"))`))
	tb.wait("the on-sale filter", fmt.Sprintf(`document.querySelector(%s)`, js(row)))
	return id
}

func changeStock(t *testing.T, tb *tab, c *apptest.Client, id int64) {
	t.Helper()
	n := fmt.Sprint(phoneStock)
	tb.do("change the stock", setValue("#new-stock-value", n), click("#stock-form button"))
	tb.wait("the stock change", fmt.Sprintf(`document.getElementById("status").textContent.includes(%s)`, js("is now "+n+".")))
	if it := c.AdminItem(t, id); it.Stock != phoneStock {
		t.Errorf("stock after the change: got %d, want %d", it.Stock, phoneStock)
	}
	tb.wait("the live view's stock", fmt.Sprintf(`document.getElementById("live-stock").textContent === %s`, js(n)))
}

func watchLive(t *testing.T, tb *tab, id int64) {
	t.Helper()
	n := fmt.Sprint(phoneStock)
	tb.wait("the live sold count to reach the stock", fmt.Sprintf(`document.getElementById("live-sold").textContent === %s && document.getElementById("live-remaining").textContent === "0"`, js(n)))
	if got := tb.text("#live-status"); got != "sold out" {
		t.Errorf("live status: got %q, want sold out", got)
	}
	if want := n + " sold of " + n + " (100%)"; !strings.Contains(tb.text("#live-progress"), want) {
		t.Errorf("progress chart: got %q, want %s", tb.text("#live-progress"), want)
	}
	// The refusals the sale page met are counted by reason, with labels.
	tb.wait("the refusals by reason", `document.querySelector('#live-rejections [data-code="sold_out"]') && document.querySelector('#live-rejections [data-code="already_purchased"]')`)
	if got := tb.text("#live-rejections"); !strings.Contains(got, "sold out") || !strings.Contains(got, "already bought") {
		t.Errorf("refusals chart: got %q, want labelled bars", got)
	}
	for _, code := range []string{"sold_out", "already_purchased"} {
		if got := tb.text(fmt.Sprintf(`#live-rejections [data-code=%q]`, code)); got != "1" {
			t.Errorf("refusals %s: got %q, want 1", code, got)
		}
	}
	// The list follows the live view.
	row := fmt.Sprintf(`#item-rows tr[data-id="%d"]`, id)
	tb.wait("the listed item sold out", fmt.Sprintf(`document.querySelector(%s).textContent.includes("sold out")`, js(row)))
	if got, want := tb.rows(row), n+" "+n+" 0"; len(got) != 1 || strings.Join(got[0][3:6], " ") != want {
		t.Errorf("listed stock, sold, remaining: got %v, want %s", got, want)
	}
	// The rate chart has drawn a line of samples.
	tb.wait("the rate chart", `document.querySelector("#live-chart polyline")`)
}

func refuseStockBelowSold(t *testing.T, tb *tab, c *apptest.Client, id int64) {
	t.Helper()
	low := fmt.Sprint(phone.stock)
	tb.do("lower the stock below sold", setValue("#new-stock-value", low), click("#stock-form button"))
	tb.wait("the refusal", `document.getElementById("stock-error").textContent.length > 0`)
	if got := tb.text("#stock-error"); !strings.Contains(got, "The stock cannot be "+low+": that is fewer units than are already sold") {
		t.Errorf("stock below sold: got %q, want it in plain words", got)
	}
	if it := c.AdminItem(t, id); it.Stock != phoneStock {
		t.Errorf("stock after a refused change: got %d, want %d", it.Stock, phoneStock)
	}
}

func reconcileDryRun(t *testing.T, tb *tab) {
	t.Helper()
	tb.do("reconcile dry run", click("#rc-dry"))
	tb.wait("the reconciliation", `!document.getElementById("rc-result").hidden`)
	if got := tb.text("#rc-drift"); got != "No drift: the database and the gate agree." {
		t.Errorf("dry run verdict: got %q, want no drift", got)
	}
	got := map[string]string{}
	for _, r := range tb.rows("#rc-rows tr") {
		got[r[0]] = strings.Join(r[1:], " | ")
	}
	both := fmt.Sprintf("%d | %d", phoneStock, phoneStock)
	for what, want := range map[string]string{"Stock": both, "Sold (gate: taken)": both, "Buyers (live orders)": both, "Gate present": "– | yes"} {
		if got[what] != want {
			t.Errorf("reconciliation row %s: got %q, want database | gate %q (table %v)", what, got[what], want, got)
		}
	}
}

// repairDrift gives the gate a wrong stock behind the service's back; a dry
// run shows the drift side by side, and a confirmed repair mends it.
func repairDrift(t *testing.T, tb *tab, b testenv.Backend, id int64) {
	t.Helper()
	meta := fmt.Sprintf("%s:{item:%d}:meta", b.KeyPrefix, id)
	wrong := phoneStock + 30
	if err := b.Redis(t).HSet(context.Background(), meta, "stock", wrong).Err(); err != nil {
		t.Fatal(err)
	}
	tb.do("reconcile dry run", click("#rc-dry"))
	tb.wait("the drift", `document.getElementById("rc-drift").dataset.drift !== "0"`)
	if got, want := tb.text("#rc-drift-list"), fmt.Sprintf("gate stock %d, database stock %d", wrong, phoneStock); !strings.Contains(got, want) {
		t.Errorf("drift list: got %q, want the gate stock named (%s)", got, want)
	}
	for _, r := range tb.rows("#rc-rows tr") {
		if want := fmt.Sprintf("%d | %d", phoneStock, wrong); r[0] == "Stock" && strings.Join(r[1:], " | ") != want {
			t.Errorf("stock row: got %v, want database | gate %s", r, want)
		}
	}
	tb.do("repair", click("#rc-repair"))
	tb.wait("the confirmation", `document.getElementById("confirm").open`)
	tb.do("confirm", click("#confirm-ok"))
	tb.wait("the repair", `document.getElementById("rc-drift").textContent.startsWith("Repaired.")`)
	if got, err := b.Redis(t).HGet(context.Background(), meta, "stock").Result(); err != nil || got != fmt.Sprint(phoneStock) {
		t.Errorf("gate stock after the repair: got %q %v, want %d", got, err, phoneStock)
	}
	tb.do("reconcile dry run", click("#rc-dry"))
	tb.wait("no drift", `document.getElementById("rc-drift").textContent === "No drift: the database and the gate agree."`)
}

// requeueDeadLetter makes a real dead letter (the database refuses one
// lua-async order, through a trigger), shows it in the console, cancels a
// requeue, then requeues it once the trigger is gone, and sees the order
// written.
func requeueDeadLetter(t *testing.T, tb *tab, c *apptest.Client, b testenv.Backend) int64 {
	t.Helper()
	it := c.CreateItem(t, 5, "lua-async")
	db := b.DB(t)
	poison := `CREATE TRIGGER poison BEFORE INSERT ON orders WHEN NEW.user_id = 'Poison' BEGIN SELECT RAISE(ABORT, 'poisoned by the test'); END`
	if b.MySQLDSN != "" {
		poison = `CREATE TRIGGER poison BEFORE INSERT ON orders FOR EACH ROW BEGIN IF NEW.user_id = 'Poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned by the test'; END IF; END`
	}
	if err := db.Exec(poison).Error; err != nil {
		t.Fatalf("create trigger: %v", err)
	}
	r, err := c.PlaceOrder(it.ID, "Poison", "")
	if err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("order: got %d %s %v, want 202", r.Status, r.Body, err)
	}
	var o apptest.Order
	r.JSON(t, &o)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var dl struct {
			DeadLetters []any `json:"dead_letters"`
		}
		c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d/dead-letters", it.ID), nil, true, nil).JSON(t, &dl)
		if len(dl.DeadLetters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter after 15s: %+v", dl)
		}
	}

	tb.do("open the lua-async item", clearValue("#filter"), click("#refresh"))
	btn := fmt.Sprintf(`#item-rows tr[data-id="%d"] button`, it.ID)
	tb.wait("the lua-async item listed", fmt.Sprintf(`document.querySelector(%s)`, js(btn)))
	tb.do("open it", click(btn))
	tb.wait("its detail", fmt.Sprintf(`document.getElementById("d-id").textContent === "%d"`, it.ID))
	tb.wait("the queue in the live view", `!document.getElementById("live-queue").hidden && document.getElementById("q-dead").textContent === "1"`)
	tb.do("show dead letters", click("#dl-load"))
	tb.wait("the dead letter", `document.querySelectorAll("#dl-rows tr").length === 1`)
	if got := tb.text("#dl-rows"); !strings.Contains(got, o.ID) || !strings.Contains(got, "Poison") || !strings.Contains(got, "poisoned by the test") {
		t.Errorf("dead letter row: got %q, want the order, its user and the reason", got)
	}

	// Cancelling the confirmation (by keyboard: Escape) requeues nothing.
	tb.do("requeue, then cancel", click("#dl-requeue"))
	tb.wait("the confirmation", `document.getElementById("confirm").open`)
	if got := tb.text("#confirm-title"); got != "Requeue dead letters?" {
		t.Errorf("confirmation title: got %q", got)
	}
	var focused string
	tb.eval(`document.activeElement.id`, &focused)
	if focused != "confirm-cancel" {
		t.Errorf("focus in the confirmation: got %q, want the safe choice, confirm-cancel", focused)
	}
	tb.do("cancel", chromedp.KeyEvent(kb.Escape))
	tb.wait("the cancellation", `document.getElementById("dl-result").textContent === "Nothing was requeued."`)
	if got := c.AwaitOrder(t, o.ID, 0); got.Status != "pending" {
		t.Errorf("order after a cancelled requeue: got %s, want pending", got.Status)
	}

	if err := db.Exec("DROP TRIGGER poison").Error; err != nil {
		t.Fatalf("drop trigger: %v", err)
	}
	tb.do("requeue, then confirm", click("#dl-requeue"))
	tb.wait("the confirmation", `document.getElementById("confirm").open`)
	if got := tb.text("#confirm-text"); !strings.Contains(got, "Move the 1 dead letter of item") {
		t.Errorf("confirmation: got %q", got)
	}
	tb.do("confirm", click("#confirm-ok"))
	tb.wait("the requeue", `document.getElementById("dl-result").textContent === "Requeued 1 order."`)
	if got := c.AwaitOrder(t, o.ID, 15*time.Second); got.Status != "created" {
		t.Errorf("requeued order: got %s, want created", got.Status)
	}
	tb.wait("the empty dead-letter count", `document.getElementById("q-dead").textContent === "0"`)
	return it.ID
}

// loadMore: the list shows 50 items, newest first, and the rest on request.
func loadMore(t *testing.T, tb *tab, c *apptest.Client) {
	t.Helper()
	var last int64
	for range 50 {
		last = c.CreateItem(t, 1, "lua").ID
	}
	tb.do("list all", clearValue("#filter"), click("#refresh"))
	tb.wait("a full page", `document.querySelectorAll("#item-rows tr").length === 50 && !document.getElementById("more").hidden`)
	if got := tb.rows("#item-rows tr"); got[0][0] != strconv.FormatInt(last, 10) {
		t.Errorf("first row: got item %s, want the newest, %d", got[0][0], last)
	}
	var all struct {
		Items []any `json:"items"`
	}
	c.Must(t, "GET", "/api/v1/admin/items?limit=200", nil, true, nil).JSON(t, &all)
	tb.do("load more", click("#more"))
	tb.wait("the rest", fmt.Sprintf(`document.querySelectorAll("#item-rows tr").length === %d && document.getElementById("more").hidden`, len(all.Items)))
}
