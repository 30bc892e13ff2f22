package gate

import (
	"sync"
	"time"
)

// How long this process trusts a "sold out" without asking Redis or the
// database again. Subscribed to the events channel (see Events), every
// restock anywhere reaches every instance, so a "sold out" holds until one
// does; soldOutSafety only bounds it in case a message is lost on a
// subscription that looked healthy. Without the subscription (before it is
// confirmed, or while it is down) a "sold out" is trusted for soldOutAlone,
// and a stock change through another instance is seen within that time.
const (
	soldOutAlone  = time.Second
	soldOutSafety = 10 * time.Second
)

// Memo remembers which items are sold out, so the stampede after a
// sell-out is refused without a round trip.
//
// Each restock of an item starts a new generation, and a "sold out" learned
// by a request that noted an older generation is not remembered: it may
// predate the restock. Restocks are numbered per item in Redis (the number
// and the message are one script, so every subscriber sees the numbers in
// order); a "sold out" from another instance carries the number its request
// knew and is ignored here when this instance has seen a later restock,
// since Redis delivered that restock first only if it was published first.
// A (re)subscription may have lost messages: it voids every mark, and
// marks from requests noted before it.
type Memo struct {
	mu         sync.RWMutex
	items      map[int64]soldOutEntry
	epoch      uint64    // bumped by every confirmed subscription
	subscribed bool      // confirmed, and no error since
	since      time.Time // when the current subscription was confirmed

	safety time.Duration    // zero: soldOutSafety
	now    func() time.Time // nil: time.Now
}

type soldOutEntry struct {
	gen uint64    // bumped by every restock of the item
	seq int64     // the highest restock number seen
	at  time.Time // when it was known sold out; zero: it is not
}

// MemoGen is what a request notes before it asks whether stock is left.
type MemoGen struct {
	epoch, gen uint64
	at         time.Time
}

func (m *Memo) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// fresh reports whether e says sold out at now; m.mu is held.
func (m *Memo) fresh(e soldOutEntry, now time.Time) bool {
	if e.at.IsZero() {
		return false
	}
	trust := soldOutAlone
	if m.subscribed {
		trust = soldOutSafety
		if m.safety > 0 {
			trust = m.safety
		}
	}
	return now.Sub(e.at) < trust
}

func (m *Memo) entries() map[int64]soldOutEntry {
	if m.items == nil {
		m.items = map[int64]soldOutEntry{}
	}
	return m.items
}

// Generation is what a request notes before it asks whether stock is left.
func (m *Memo) Generation(id int64) MemoGen {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return MemoGen{epoch: m.epoch, gen: m.items[id].gen, at: m.clock()}
}

// Mark remembers a "sold out" learned by a request that noted g. It returns
// whether this is news (the item was not known sold out) and the restock
// number the request knew: what to tell the other instances.
func (m *Memo) Mark(id int64, g MemoGen) (news bool, seq int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries()[id]
	if g.epoch != m.epoch || g.gen != e.gen {
		return false, 0
	}
	now := m.clock()
	news = !m.fresh(e, now)
	e.at = now
	m.items[id] = e
	return news, e.seq
}

// markRemote applies another instance's "sold out", learned by a request
// that knew restock number seq and noted its generation at noted.
func (m *Memo) markRemote(id, seq int64, noted time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries()[id]
	switch {
	case !m.subscribed || noted.Before(m.since):
		// It may predate a restock published before this subscription.
		return
	case seq < e.seq:
		return // it predates a restock seen here
	case seq > e.seq:
		// A restock this instance missed: what its own requests learned
		// before it is stale too.
		e.gen++
		e.seq = seq
	}
	e.at = m.clock()
	m.items[id] = e
}

// Restocked starts a new generation after restock number seq; seq 0 is a
// change whose number is not known (its announcement failed).
func (m *Memo) Restocked(id, seq int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries()[id]
	if seq > 0 && seq <= e.seq {
		return // seen already: its generation has started
	}
	e.gen++
	e.seq = max(e.seq, seq)
	e.at = time.Time{}
	m.items[id] = e
}

// Forget starts a new generation after a change this process made.
func (m *Memo) Forget(id int64) { m.Restocked(id, 0) }

// subscribe records a confirmed (re)subscription. Messages may have been
// lost before it, so everything known is dropped.
func (m *Memo) subscribe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.subscribed = true
	m.since = m.clock()
	for id, e := range m.items {
		e.at = time.Time{}
		m.items[id] = e
	}
}

// unsubscribe records that the subscription failed: marks are trusted for
// soldOutAlone until the next confirmed subscription.
func (m *Memo) unsubscribe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subscribed = false
}

// Subscribed reports whether the events subscription is confirmed and
// healthy.
func (m *Memo) Subscribed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.subscribed
}

// SoldOut reports whether item id is known sold out (see the package's
// trust bounds, soldOutAlone and soldOutSafety). It costs no round trip.
func (m *Memo) SoldOut(id int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.items[id]
	return ok && m.fresh(e, m.clock())
}

// SetSafety replaces soldOutSafety, the trust in a mark while subscribed
// (tests: zero restores it). Call it before the memo is in use.
func (m *Memo) SetSafety(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.safety = d
}

// SetClock replaces time.Now for the memo (tests: nil restores it).
func (m *Memo) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}
