package stock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/stock"
)

// TestItemNames: a name must show something and hold no control
// character, in valid UTF-8; any printable text up to MaxNameLen bytes is
// fine.
func TestItemNames(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"Widget", true},
		{"Grüne Äpfel – 1 kg", true},
		{"跳楼价 限量", true},
		{"👨‍👩‍👧 family pack", true}, // zero-width joiners between visible runes
		{" padded ", true},
		{strings.Repeat("x", stock.MaxNameLen), true},
		{"", false},
		{strings.Repeat("x", stock.MaxNameLen+1), false},
		{" ", false},
		{"   ", false},
		{"\u00a0\u3000", false},        // no-break and ideographic spaces
		{"\u200b\ufeff", false},        // zero-width space and BOM: format runes only
		{" \u200b ", false},            // blank with an invisible rune
		{"a\x00b", false},              // NUL
		{"line\nbreak", false},         // C0
		{"tab\there", false},           // C0
		{"bell\x07", false},            // C0
		{"del\x7f", false},             // DEL
		{"c1\u0085next", false},        // C1 (NEL)
		{"c1\u009b[31m", false},        // C1 (CSI)
		{"line\u2028separator", false}, // a line break outside C0
		{"bad\xffutf8", false},         // invalid UTF-8
		{"half\xe2\x82", false},        // truncated UTF-8
		{"ok\ufffdreplacement", true},  // a real U+FFFD is text
	}
	for _, tc := range cases {
		err := stock.ValidateNewItem(stock.NewItem{Name: tc.name, Stock: 1, Strategy: stock.StrategyLua, Buckets: 1})
		switch {
		case tc.ok && err != nil:
			t.Errorf("name %q: got %v, want it accepted", tc.name, err)
		case !tc.ok && !errors.Is(err, stock.ErrInvalid):
			t.Errorf("name %q: got %v, want ErrInvalid", tc.name, err)
		case !tc.ok && !strings.Contains(err.Error(), "name"):
			t.Errorf("name %q: the error %q does not name the field", tc.name, err)
		}
	}
}
