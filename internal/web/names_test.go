package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// hostile is an item name that runs a script if a page ever writes it as
// HTML.
const hostile = `<img src=x onerror=alert(1)>`

// TestPagesShowNamesAsText: an item's name is text wherever the pages show
// it (the console's list and detail, the sale page and its title), never
// HTML, on every backend; nothing runs, and the Content-Security-Policy
// is never broken.
func TestPagesShowNamesAsText(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel()
		_, c := apptest.Start(t, b)
		console := br.tab(t)
		console.do("open the console", chromedp.Navigate(c.Base+"/admin/"))
		signIn(console, c)
		// createThroughForm checks the name, as text, in the list and the
		// detail.
		id := createThroughForm(t, console, c, newItem{name: hostile, stock: 3, price: "12.50", cents: 1250})

		sale := br.tab(t)
		sale.do("open the sale page", chromedp.Navigate(fmt.Sprintf("%s/sale/%d", c.Base, id)))
		sale.wait("the item", `document.getElementById("remaining").textContent === "3"`)
		if got := sale.text("#name"); got != hostile {
			t.Errorf("sale page name: got %q, want %q as text", got, hostile)
		}
		var title string
		sale.eval(`document.title`, &title)
		if want := hostile + " – flash sale"; title != want {
			t.Errorf("sale page title: got %q, want %q", title, want)
		}
		sale.do("buy", keys("#user-id", "reader"), click("#buy"))
		sale.wait("the order", `document.getElementById("result").dataset.outcome === "created"`)
		console.do("refresh the list", click("#refresh"))
		console.wait("the sale in the list", fmt.Sprintf(`document.querySelector('#item-rows tr[data-id="%d"]').cells[4].textContent.trim() === "1"`, id))

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
