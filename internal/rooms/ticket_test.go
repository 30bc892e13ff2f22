package rooms

import (
	"strings"
	"testing"
)

// A ticket string opens only for its item, under its key, whole, and
// names its owner.
func TestTicketSigner(t *testing.T) {
	s := newTicketSigner([]byte(strings.Repeat("k", 32)))
	other := newTicketSigner([]byte(strings.Repeat("x", 32)))
	ep := epochOf("0123456789abcdef")
	if ep == (epoch{}) {
		t.Fatal("epochOf did not decode an epoch")
	}
	tk := s.sign(7, 12345, ep, "ann")
	flip := func(i int) string { // another base64url character at i
		b := []byte(tk)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	if n, e, u, ok := s.open(7, tk); !ok || n != 12345 || u != "ann" || e != ep {
		t.Fatalf("open own ticket: %d %x %q %v, want 12345 %x ann true", n, e, u, ok, ep)
	}
	long := s.sign(7, 1<<62, ep, strings.Repeat("u", 64))
	if n, _, u, ok := s.open(7, long); !ok || n != 1<<62 || len(u) != 64 {
		t.Fatalf("open the longest ticket: %d %q %v", n, u, ok)
	}
	for name, c := range map[string]struct {
		item int64
		t    string
		s    ticketSigner
	}{
		"another item":  {8, tk, s},
		"another key":   {7, tk, other},
		"truncated":     {7, tk[:len(tk)-1], s},
		"one more char": {7, tk + "A", s},
		"first changed": {7, flip(0), s},
		"mid changed":   {7, flip(len(tk) / 2), s},
		"last changed":  {7, flip(len(tk) - 1), s},
		"empty":         {7, "", s},
		"not base64":    {7, "!!!!", s},
		"very long":     {7, strings.Repeat("A", 200), s},
		"no user":       {7, s.sign(7, 1, ep, ""), s},
	} {
		if n, _, _, ok := c.s.open(c.item, c.t); ok {
			t.Errorf("%s: opened as %d", name, n)
		}
	}
	if s.sign(7, 1, ep, "ann") == s.sign(7, 2, ep, "ann") || s.sign(7, 1, ep, "ann") == s.sign(8, 1, ep, "ann") ||
		s.sign(7, 1, ep, "ann") == s.sign(7, 1, ep, "ben") || s.sign(7, 1, ep, "ann") == s.sign(7, 1, epoch{}, "ann") {
		t.Error("two tickets share a string")
	}
}
