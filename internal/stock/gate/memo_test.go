package gate

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestSoldOutMemoIgnoresMarksFromBeforeAStockChange(t *testing.T) {
	var m Memo
	gen := m.Generation(7)
	m.Mark(7, gen)
	if !m.SoldOut(7) {
		t.Fatal("after mark: got not sold out, want sold out")
	}
	stale := m.Generation(7)
	m.Forget(7) // stock raised while a request was asking
	if m.SoldOut(7) {
		t.Fatal("after forget: got sold out, want not")
	}
	m.Mark(7, stale)
	if m.SoldOut(7) {
		t.Error("a mark from before the stock change was remembered")
	}
	m.Mark(7, m.Generation(7))
	if !m.SoldOut(7) {
		t.Error("a mark from after the stock change was ignored")
	}
	if m.SoldOut(8) {
		t.Error("an unknown item is sold out")
	}
}

// fakeClock is a settable time for the memo.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSoldOutMemoTrust(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := Memo{now: clock.now}

	// Not subscribed: a mark holds for soldOutAlone.
	if news, _ := m.Mark(1, m.Generation(1)); !news {
		t.Error("first mark: got news false, want true")
	}
	if news, _ := m.Mark(1, m.Generation(1)); news {
		t.Error("second mark of a sold-out item: got news true, want false")
	}
	clock.add(soldOutAlone - time.Millisecond)
	if !m.SoldOut(1) {
		t.Error("unsubscribed, just under soldOutAlone: got not sold out, want sold out")
	}
	clock.add(time.Millisecond)
	if m.SoldOut(1) {
		t.Error("unsubscribed, after soldOutAlone: got sold out, want not")
	}

	// Subscribed: a mark holds until a restock, at most soldOutSafety.
	m.subscribe()
	m.Mark(1, m.Generation(1))
	clock.add(soldOutSafety - time.Millisecond)
	if !m.SoldOut(1) {
		t.Error("subscribed, just under soldOutSafety: got not sold out, want sold out")
	}
	clock.add(time.Millisecond)
	if m.SoldOut(1) {
		t.Error("subscribed, after soldOutSafety: got sold out, want not")
	}

	// Losing the subscription falls back to soldOutAlone at once.
	m.Mark(1, m.Generation(1))
	clock.add(2 * soldOutAlone)
	if !m.SoldOut(1) {
		t.Fatal("subscribed, 2s after the mark: got not sold out, want sold out")
	}
	m.unsubscribe()
	if m.SoldOut(1) {
		t.Error("unsubscribed, 2s after the mark: got sold out, want not")
	}

	// A (re)subscription forgets every mark, and marks noted before it.
	m.Mark(1, m.Generation(1))
	before := m.Generation(2)
	m.subscribe()
	if m.SoldOut(1) {
		t.Error("after a resubscription: got sold out, want every mark forgotten")
	}
	m.Mark(2, before)
	if m.SoldOut(2) {
		t.Error("a mark noted before a resubscription was remembered")
	}
}

func TestSoldOutMemoRestockNumbers(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := Memo{now: clock.now}
	m.subscribe()
	noted := clock.now()
	clock.add(time.Millisecond)

	m.Restocked(5, 3)
	m.markRemote(5, 2, noted) // learned before restock 3, published after it
	if m.SoldOut(5) {
		t.Error("a remote sold out from before restock 3 was remembered")
	}
	m.markRemote(5, 3, noted)
	if !m.SoldOut(5) {
		t.Error("a remote sold out that knew restock 3 was ignored")
	}
	m.Restocked(5, 3) // the echo of a restock already applied changes nothing
	if !m.SoldOut(5) {
		t.Error("a restock seen before cleared a newer sold out")
	}
	m.Restocked(5, 4)
	if m.SoldOut(5) {
		t.Error("restock 4 did not clear the sold out")
	}

	// A remote sold out that knew a restock this instance missed voids this
	// instance's own marks in flight.
	inflight := m.Generation(6)
	m.markRemote(6, 9, noted)
	if !m.SoldOut(6) {
		t.Fatal("a remote sold out with a newer restock number was ignored")
	}
	m.Restocked(6, 9)
	if !m.SoldOut(6) {
		t.Error("restock 9, learned from the sold out, cleared it again")
	}
	clock.add(soldOutSafety / 2)
	m.Mark(6, inflight) // would hold the mark past the remote one's expiry
	clock.add(soldOutSafety/2 + time.Millisecond)
	if m.SoldOut(6) {
		t.Error("a local mark noted before the missed restock was remembered")
	}

	// A remote sold out noted before this subscription may predate a
	// restock published before it: ignored.
	m.subscribe()
	m.markRemote(7, 0, noted)
	if m.SoldOut(7) {
		t.Error("a remote sold out noted before the subscription was remembered")
	}
	m.markRemote(7, 0, clock.now())
	if !m.SoldOut(7) {
		t.Error("a remote sold out noted after the subscription was ignored")
	}
	m.unsubscribe()
	m.markRemote(8, 0, clock.now())
	if m.SoldOut(8) {
		t.Error("a remote sold out was applied while unsubscribed")
	}
}

func TestEventsApplyParsesMessages(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := &Memo{now: clock.now}
	m.subscribe()
	e := &Events{memo: m}
	for _, bad := range []string{"", "soldout", "soldout x 1 1", "soldout 1 1", "restock 1", "boom 1 1 1", "soldout 1 y 1"} {
		e.apply(bad)
	}
	if m.SoldOut(1) {
		t.Fatal("a malformed message marked item 1")
	}
	e.apply("soldout 1 0 " + strconv.FormatInt(clock.now().UnixMicro(), 10))
	if !m.SoldOut(1) {
		t.Fatal("soldout message: got not sold out, want sold out")
	}
	e.apply("restock 1 1")
	if m.SoldOut(1) {
		t.Error("restock message: got sold out, want not")
	}
}
