package gate

import (
	"context"
	"fmt"
)

// A lua-async item's gate carries its waiting room: the field room of its
// meta is "1" while the item has one, and the enqueue script refuses an
// order without a verified pass while it is there (its 202 is decided in
// Redis, before any database write, so the database cannot refuse it as
// it does the sync strategies' orders). The mark is written while the
// database holds the item's row lock, before the change of the room
// commits (MarkRoom, see store.ChangeRoom), and every rebuild, under the
// same lock, writes it from item_rooms (Rebuild.Roomed): a gate lost with
// Redis comes back with it. The other strategies' gates never carry it;
// their orders' transactions read item_rooms themselves.

// MarkRoom marks the gate of item id, of k buckets, with a waiting room
// (roomed), or clears the mark: every bucket's meta, since a buyer is
// admitted in the home bucket alone. A missing bucket is left missing:
// its build (the whole item's) reads the room from the database.
func (g *Gate) MarkRoom(ctx context.Context, id int64, k int, roomed bool) error {
	flag := ""
	if roomed {
		flag = "1"
	}
	for _, bk := range AllBuckets(id, k) {
		status, err := runStatus(ctx, g.rdb, markRoomScript, "mark waiting room", []string{g.keys.Bucket(bk).Meta}, flag)
		if err != nil {
			return err
		}
		if status != "marked" && status != "missing" {
			return fmt.Errorf("redis: mark waiting room: unexpected status %q", status)
		}
	}
	return nil
}

// roomFlag is a rebuild's room field for r: "1" for a lua-async item with
// a waiting room, "" otherwise.
func roomFlag(r Rebuild) string {
	if r.Roomed && r.Item.Strategy.Queued() {
		return "1"
	}
	return ""
}
