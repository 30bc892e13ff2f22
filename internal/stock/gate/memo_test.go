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

// TestSoldOutMemoRestockIDs: a "sold out" from another instance is
// trusted only when it knew the restock this instance knows as the item's
// last (or this instance has heard of none since its subscription).
func TestSoldOutMemoRestockIDs(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := Memo{now: clock.now}
	m.subscribe()
	noted := clock.now()
	clock.add(time.Millisecond)

	m.heard(5, "r2")
	m.heard(5, "r3")
	m.markRemote(5, "r2", noted) // learned before restock r3, published after it
	if m.SoldOut(5) {
		t.Error("a remote sold out from before restock r3 was remembered")
	}
	m.markRemote(5, "r9", noted) // a restock not heard here: newer or older, unknown
	if m.SoldOut(5) {
		t.Error("a remote sold out that knew a restock unknown here was remembered")
	}
	m.markRemote(5, "r3", noted)
	if !m.SoldOut(5) {
		t.Error("a remote sold out that knew restock r3 was ignored")
	}
	m.heard(5, "r3") // the echo of a restock already applied changes nothing
	if !m.SoldOut(5) {
		t.Error("a restock seen before cleared a newer sold out")
	}
	m.heard(5, "r4")
	if m.SoldOut(5) {
		t.Error("restock r4 did not clear the sold out")
	}

	// No restock heard since the subscription: a remote sold out is
	// trusted, and voids this instance's own marks in flight (they may
	// predate the restock it knew).
	inflight := m.Generation(6)
	m.markRemote(6, "r9", noted)
	if !m.SoldOut(6) {
		t.Fatal("a remote sold out of an item with no restock heard was ignored")
	}
	m.heard(6, "r9")
	if !m.SoldOut(6) {
		t.Error("restock r9, learned from the sold out, cleared it again")
	}
	clock.add(soldOutSafety / 2)
	m.Mark(6, inflight) // would hold the mark past the remote one's expiry
	clock.add(soldOutSafety/2 + time.Millisecond)
	if m.SoldOut(6) {
		t.Error("a local mark noted before the adopted restock was remembered")
	}

	// A remote sold out noted before this subscription may predate a
	// restock published before it: ignored. A resubscription forgets the
	// restocks heard (messages may have been lost): what is noted after it
	// is trusted again.
	m.subscribe()
	m.markRemote(7, "", noted)
	if m.SoldOut(7) {
		t.Error("a remote sold out noted before the subscription was remembered")
	}
	m.markRemote(7, "", clock.now())
	if !m.SoldOut(7) {
		t.Error("a remote sold out noted after the subscription was ignored")
	}
	m.markRemote(5, "r7", clock.now()) // r4 was heard before the resubscription
	if !m.SoldOut(5) {
		t.Error("after a resubscription, a remote sold out noted after it was ignored")
	}
	m.unsubscribe()
	m.markRemote(8, "", clock.now())
	if m.SoldOut(8) {
		t.Error("a remote sold out was applied while unsubscribed")
	}
}

// TestSoldOutMemoForgetsOnEveryRestock is issue 20's defect: restocks were
// numbered by a counter in Redis and a number at or below the highest seen
// was ignored, so after Redis lost the counter (it counted from 1 again)
// every instance, the one that raised the stock included, kept answering
// sold out. Now a restock this process made always forgets the item, and a
// restock heard forgets it unless it is the very last one seen: an older
// or repeated one too.
func TestSoldOutMemoForgetsOnEveryRestock(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := Memo{now: clock.now}
	m.subscribe()
	markSoldOut := func(id int64) {
		t.Helper()
		m.Mark(id, m.Generation(id))
		if !m.SoldOut(id) {
			t.Fatalf("item %d: got not sold out after a mark, want sold out", id)
		}
	}

	// Local: even a restock whose echo arrived first, and whose id is the
	// last seen, forgets the item.
	m.heard(1, "a")
	markSoldOut(1)
	m.Restocked(1, "a")
	if m.SoldOut(1) {
		t.Error("a local restock whose echo came first left the item sold out")
	}
	markSoldOut(1)
	m.Restocked(1, NewRestockID())
	if m.SoldOut(1) {
		t.Error("a local restock left the item sold out")
	}

	// Heard: any id but the last, including an older one (a replayed
	// message, a Redis that came back from before), forgets the item.
	for _, r := range []RestockID{"b", "c", "b", "a"} {
		markSoldOut(2)
		m.heard(2, r)
		if m.SoldOut(2) {
			t.Errorf("restock %q heard (last seen before it differs): got sold out, want forgotten", r)
		}
	}

	// A change whose announcement failed forgets the item, and no "sold
	// out" from elsewhere is trusted until a restock is heard: the others
	// do not know of the change.
	m.heard(3, "d")
	markSoldOut(3)
	m.Forget(3)
	if m.SoldOut(3) {
		t.Error("Forget left the item sold out")
	}
	m.markRemote(3, "d", clock.now())
	if m.SoldOut(3) {
		t.Error("after Forget, a remote sold out that knew the restock before the change was remembered")
	}
	m.heard(3, "e")
	m.markRemote(3, "e", clock.now())
	if !m.SoldOut(3) {
		t.Error("a remote sold out that knew the last restock heard was ignored")
	}
}

func TestEventsApplyParsesMessages(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := &Memo{now: clock.now}
	m.subscribe()
	e := &Events{memo: m}
	now := strconv.FormatInt(clock.now().UnixMicro(), 10)
	for _, bad := range []string{"", "soldout", "soldout x - " + now, "soldout 1 - ", "soldout 1 - y",
		"soldout 1 - " + now + " extra", "restock 1", "boom 1 - " + now} {
		e.apply(bad)
	}
	if m.SoldOut(1) {
		t.Fatal("a malformed message marked item 1")
	}
	e.apply("soldout 1 - " + now)
	if !m.SoldOut(1) {
		t.Fatal("soldout message: got not sold out, want sold out")
	}
	e.apply("restock 1 x y")
	if !m.SoldOut(1) {
		t.Fatal("a malformed restock message cleared item 1")
	}
	e.apply("restock 1 5e1f")
	if m.SoldOut(1) {
		t.Error("restock message: got sold out, want not")
	}
	e.apply("soldout 1 5e1f " + now)
	if !m.SoldOut(1) {
		t.Error("soldout message knowing the last restock: got not sold out, want sold out")
	}
}
