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
// predate the restock. Every restock carries a random id (RestockID) that
// no other restock ever has; a "sold out" from another instance carries the
// id of the last restock its instance had heard of, and is remembered here
// only if this instance knows that very restock as the item's last: any
// other id may be older or newer, which ids cannot tell. So nothing the
// memo relies on lives in Redis: losing Redis's data (a restart without
// persistence, a FLUSHALL, a failover to a replica that lagged) cannot make
// a restock look like one seen before.
//
// A restock this process made always forgets the item, as does every
// restock heard whose id is not the last one seen (an echo of it changes
// nothing). A (re)subscription may have lost messages: it voids every
// mark, marks from requests noted before it, and the last ids seen.
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
	gen  uint64    // bumped by every restock of the item
	last RestockID // the last restock seen; "": none since the subscription
	at   time.Time // when it was known sold out; zero: it is not
}

// RestockID names one restock of an item: random, never reused. "" is no
// restock (none seen).
type RestockID string

// NewRestockID returns a fresh RestockID.
func NewRestockID() RestockID { return RestockID(randomHex(8)) }

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
// whether this is news (the item was not known sold out) and the last
// restock this instance knows of: what to tell the other instances.
func (m *Memo) Mark(id int64, g MemoGen) (news bool, last RestockID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries()[id]
	if g.epoch != m.epoch || g.gen != e.gen {
		return false, ""
	}
	now := m.clock()
	news = !m.fresh(e, now)
	e.at = now
	m.items[id] = e
	return news, e.last
}

// markRemote applies another instance's "sold out", learned by a request
// that knew last as the item's last restock and noted its generation at
// noted.
func (m *Memo) markRemote(id int64, last RestockID, noted time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries()[id]
	switch {
	case !m.subscribed || noted.Before(m.since):
		// It may predate a restock published before this subscription.
		return
	case last == e.last:
	case e.last == "":
		// No restock heard since the subscription, and the request noted
		// its generation after it, so after any restock this one missed:
		// what this instance's own requests learned before is stale too.
		e.gen++
		e.last = last
	default:
		// A restock this instance has not heard of, or one older than the
		// last it heard: ids cannot tell which, so it is not trusted.
		return
	}
	e.at = m.clock()
	m.items[id] = e
}

// Restocked forgets item id after restock r, made by this process: units
// are available again.
func (m *Memo) Restocked(id int64, r RestockID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restock(id, r)
}

// heard applies restock r of item id announced on the events channel: a
// new generation, unless r is the last restock seen (the echo of this
// process's own, or a restock a "sold out" told of first).
func (m *Memo) heard(id int64, r RestockID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r != "" && r == m.items[id].last {
		return
	}
	m.restock(id, r)
}

// restock starts a new generation after restock r; m.mu is held.
func (m *Memo) restock(id int64, r RestockID) {
	e := m.entries()[id]
	e.gen++
	e.last = r
	e.at = time.Time{}
	m.items[id] = e
}

// Forget starts a new generation after a change this process made whose
// announcement failed: it gets an id no other instance knows, so until a
// restock is heard no "sold out" from elsewhere is trusted (it may predate
// the change).
func (m *Memo) Forget(id int64) { m.Restocked(id, NewRestockID()) }

// subscribe records a confirmed (re)subscription. Messages may have been
// lost before it, so everything known is dropped: the marks, and the last
// restocks seen (a "sold out" noted after the subscription is trusted
// until a restock is heard).
func (m *Memo) subscribe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.subscribed = true
	m.since = m.clock()
	for id, e := range m.items {
		e.at = time.Time{}
		e.last = ""
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
