package stock

import "testing"

func TestSoldOutMemoIgnoresMarksFromBeforeAStockChange(t *testing.T) {
	var m soldOutMemo
	gen := m.generation(7)
	m.mark(7, gen)
	if !m.soldOut(7) {
		t.Fatal("after mark: got not sold out, want sold out")
	}
	stale := m.generation(7)
	m.forget(7) // stock raised while a request was asking
	if m.soldOut(7) {
		t.Fatal("after forget: got sold out, want not")
	}
	m.mark(7, stale)
	if m.soldOut(7) {
		t.Error("a mark from before the stock change was remembered")
	}
	m.mark(7, m.generation(7))
	if !m.soldOut(7) {
		t.Error("a mark from after the stock change was ignored")
	}
	if m.soldOut(8) {
		t.Error("an unknown item is sold out")
	}
}
