package room

import (
	"fmt"

	"github.com/seckill/seckill/internal/stock/gate"
)

// keys names one item's room keys. They extend the item's gate keys
// (gate.Keys.Item, "<prefix>:{item:ID}"), so they share its hash tag: on a
// Redis Cluster a room lives on its item's slot and every script here runs
// on one node.
type keys struct {
	meta     string // hash: phase, commitment, seed, pass ttl, counters, rate window
	users    string // hash: user id -> ticket (one place per user)
	tickets  string // hash: ticket -> user id
	rank     string // string: 4 bytes a pre-queue ticket, its serve number (after the draw)
	draw     string // string: 4 bytes a serve number, its pre-queue ticket (after the draw)
	leaves   string // string: 32 bytes a pre-queue ticket, its leaf (TicketLeaf; after the draw)
	live     string // sorted set: admitted, unused, unexpired tickets by pass expiry (ms)
	used     string // set: tickets whose pass bought
	spent    string // sorted set: tickets whose pass bought in the last SpentGrace, by the node's TIME (ms)
	deferred string // sorted set: tickets deferred (seen lately, not very lately: seen.go) by when (ms)
	claim    string // sorted set: admitted tickets whose pass was not read yet, by claim deadline (ms)
}

func newKeys(prefix string, itemID int64) (keys, error) {
	if itemID <= 0 {
		return keys{}, fmt.Errorf("%w: item id %d", ErrInvalid, itemID)
	}
	gk, err := gate.NewKeys(prefix)
	if err != nil {
		return keys{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	base := gk.Item(itemID) + ":room"
	return keys{
		meta:     base,
		users:    base + ":users",
		tickets:  base + ":tickets",
		rank:     base + ":rank",
		draw:     base + ":draw",
		leaves:   base + ":leaves",
		live:     base + ":live",
		used:     base + ":used",
		spent:    base + ":spent",
		deferred: base + ":deferred",
		claim:    base + ":claim",
	}, nil
}

func (k keys) all() []string {
	return []string{k.meta, k.users, k.tickets, k.rank, k.draw, k.leaves, k.live, k.used, k.spent, k.deferred, k.claim}
}
