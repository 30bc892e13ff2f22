// Package web is the browser side of the service: the admin console, the
// sale page and the index at /, plain HTML, CSS and JavaScript embedded in
// the binary. Nothing is fetched from elsewhere at run time and nothing is
// built: the files are served as they are in static/.
//
// Every page and asset is served with a strict Content-Security-Policy (no
// inline script or style, everything from this origin), so data a page
// shows can never run as code; the scripts also write data only with
// textContent.
package web

import (
	"bytes"
	"embed"
	"html/template"
	"mime"
	"net/http"
	"path"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every page and asset.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// started stamps the embedded files: they change only with the binary.
var started = time.Now()

// Asset serves static/assets/name (a script, the style sheet, the icon).
// An unknown name is false, and nothing is written.
func Asset(w http.ResponseWriter, r *http.Request, name string) bool {
	b, err := static.ReadFile("static/assets/" + path.Base(name))
	if err != nil || name != path.Base(name) {
		return false
	}
	serve(w, r, mime.TypeByExtension(path.Ext(name)), b)
	return true
}

// ConsolePage is the admin console's page.
type ConsolePage struct{ html []byte }

// NewConsolePage renders the console. salePagesHere says the sale pages are
// served on the console's listener (there is no separate admin listener), so
// the console links to them.
func NewConsolePage(salePagesHere bool) *ConsolePage {
	where := "elsewhere"
	if salePagesHere {
		where = "here"
	}
	return &ConsolePage{html: render("static/console.html", struct{ SalePages string }{where})}
}

// ServeHTTP serves the page.
func (p *ConsolePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serve(w, r, "text/html; charset=utf-8", p.html)
}

// IndexPage is the page at /: where the console, the sale pages and the
// API document are.
type IndexPage struct{ html []byte }

// NewIndexPage renders the index of one listener. consoleHere says it
// serves the console, salePagesHere the sale pages and the API document
// (the public listener); with no separate admin listener both are true.
func NewIndexPage(consoleHere, salePagesHere bool) *IndexPage {
	return &IndexPage{html: render("static/index.html", struct{ Console, SalePages bool }{consoleHere, salePagesHere})}
}

// ServeHTTP serves the page.
func (p *IndexPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serve(w, r, "text/html; charset=utf-8", p.html)
}

// SalePage is the sale page, rendered once for the service's user mode.
type SalePage struct{ html []byte }

// NewSalePage renders the sale page. userTokens says orders take their user
// from a bearer token (JWT mode) rather than a user id in the body: the page
// then asks for a token.
func NewSalePage(userTokens bool) *SalePage {
	mode := "user-id"
	if userTokens {
		mode = "user-token"
	}
	return &SalePage{html: render("static/sale.html", struct{ Mode string }{mode})}
}

// render executes an embedded page as an html/template with data, once, at
// start: the pages are fixed and the data a few constant words.
func render(name string, data any) []byte {
	src, err := static.ReadFile(name)
	if err != nil {
		panic(err) // embedded: a missing page is a build mistake
	}
	t := template.Must(template.New(name).Parse(string(src)))
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// ServeHTTP serves the page; the item is read by the page's script.
func (p *SalePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serve(w, r, "text/html; charset=utf-8", p.html)
}

// SetHeaders sets the security headers of a page or asset.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-cache")
}

func serve(w http.ResponseWriter, r *http.Request, ctype string, b []byte) {
	SetHeaders(w.Header())
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, "", started, bytes.NewReader(b))
}
