package handler

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/seckill/seckill/internal/stock"
)

// TestItemViewCaching: the public view carries an ETag and a short
// max-age; If-None-Match with that tag (alone, in a list, weak, or "*")
// gets an empty 304, another tag the full view; a new view from the shop
// gets a new tag.
func TestItemViewCaching(t *testing.T) {
	t.Parallel()
	view := &stock.ItemView{ID: 7, Name: "phone", PriceCents: 100, Remaining: 3}
	shop := &fakeShop{itemView: func(_ context.Context, id int64) (*stock.ItemView, error) {
		if id != 7 {
			return nil, stock.ErrNotFound
		}
		return view, nil
	}}
	h := newTestHandler(t, shop, Config{})
	a := call(h, "GET", "/api/v1/items/7", "", nil)
	if a.status != 200 {
		t.Fatalf("got %d, want 200 (%s)", a.status, a.body)
	}
	var got publicItemJSON
	if err := json.Unmarshal(a.body, &got); err != nil || got.Remaining != 3 || got.Name != "phone" {
		t.Fatalf("body %s: got %+v (%v)", a.body, got, err)
	}
	etag := a.header.Get("ETag")
	if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		t.Fatalf("ETag %q: want a quoted tag", etag)
	}
	if cc := a.header.Get("Cache-Control"); cc != "public, max-age=1" {
		t.Errorf("Cache-Control: got %q, want public, max-age=1", cc)
	}
	for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
		a := call(h, "GET", "/api/v1/items/7", "", map[string]string{"If-None-Match": inm})
		if a.status != 304 || len(a.body) != 0 || a.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: got %d with %d bytes and ETag %q, want an empty 304 with %s", inm, a.status, len(a.body), a.header.Get("ETag"), etag)
		}
	}
	if a := call(h, "GET", "/api/v1/items/7", "", map[string]string{"If-None-Match": `"other"`}); a.status != 200 {
		t.Errorf("another tag: got %d, want 200", a.status)
	}
	// The shop reads the item again: one unit sold.
	view = &stock.ItemView{ID: 7, Name: "phone", PriceCents: 100, Remaining: 2}
	a = call(h, "GET", "/api/v1/items/7", "", map[string]string{"If-None-Match": etag})
	if a.status != 200 || a.header.Get("ETag") == etag {
		t.Fatalf("after a sale: got %d with ETag %q, want 200 with a new tag", a.status, a.header.Get("ETag"))
	}
	if err := json.Unmarshal(a.body, &got); err != nil || got.Remaining != 2 {
		t.Errorf("after a sale: body %s, want remaining 2", a.body)
	}
	if a := call(h, "GET", "/api/v1/items/8", "", nil); a.status != 404 || a.code() != CodeNotFound {
		t.Errorf("unknown item: got %d %q, want 404", a.status, a.code())
	}
}
