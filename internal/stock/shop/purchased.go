package shop

import (
	"sync"
	"time"
)

// PurchasedMaxAge is how long this process answers already_purchased from
// memory for a user the gate or the database just refused as already
// holding an order of the item, without asking again. A buyer who keeps
// clicking "buy" after buying costs one round trip per PurchasedMaxAge,
// not one per click.
//
// The bound is what it may get wrong: a reservation that goes away after
// the refusal (its write failed and it was handed back, here or on another
// instance, or it was an orphan taken back) is seen here at most
// PurchasedMaxAge later, so its user may hear already_purchased that long
// and must try again. Nothing is sold or changed on memory's word: it only
// refuses. A failed attempt answered here forgets the user at once.
const PurchasedMaxAge = time.Second

// purchasedMax bounds the memo's entries (one per item and user that was
// refused as already purchased within PurchasedMaxAge). Past it, expired
// entries go first; if every entry is fresh the memo starts afresh, which
// costs only round trips.
const purchasedMax = 1 << 16

// purchaseMemo remembers which users of which items were just refused as
// already holding an order, so their repeated attempts are refused from
// memory (see PurchasedMaxAge). Only requests without an Idempotency-Key
// are answered from it: a keyed retry must find its order.
type purchaseMemo struct {
	mu      sync.RWMutex
	entries map[purchaseKey]time.Time // when the refusal was learned
	max     int                       // 0: purchasedMax
	clock   func() time.Time          // nil: time.Now
}

type purchaseKey struct {
	item int64
	user string
}

func (m *purchaseMemo) now() time.Time {
	if m.clock != nil {
		return m.clock()
	}
	return time.Now()
}

// Holds reports whether userID was refused as already purchasing itemID
// less than PurchasedMaxAge ago.
func (m *purchaseMemo) Holds(itemID int64, userID string) bool {
	m.mu.RLock()
	at, ok := m.entries[purchaseKey{itemID, userID}]
	m.mu.RUnlock()
	return ok && m.now().Sub(at) < PurchasedMaxAge
}

// Learn records that userID holds an order or a reservation of itemID, as
// the gate or the database just said.
func (m *purchaseMemo) Learn(itemID int64, userID string) {
	now := m.now()
	limit := m.max
	if limit <= 0 {
		limit = purchasedMax
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[purchaseKey]time.Time{}
	}
	if len(m.entries) >= limit {
		for k, at := range m.entries {
			if now.Sub(at) >= PurchasedMaxAge {
				delete(m.entries, k)
			}
		}
		if len(m.entries) >= limit {
			clear(m.entries)
		}
	}
	m.entries[purchaseKey{itemID, userID}] = now
}

// Forget drops what the memo holds of userID and itemID: an attempt of the
// user failed, and the reservation it may have seen may be gone.
func (m *purchaseMemo) Forget(itemID int64, userID string) {
	k := purchaseKey{itemID, userID}
	m.mu.RLock()
	_, ok := m.entries[k]
	m.mu.RUnlock()
	if !ok {
		return
	}
	m.mu.Lock()
	delete(m.entries, k)
	m.mu.Unlock()
}

// size is how many entries the memo holds (for tests).
func (m *purchaseMemo) size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}
