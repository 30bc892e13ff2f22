package gate

import (
	"fmt"
	"strings"
	"sync"

	"github.com/seckill/seckill/internal/stock"
)

// DefaultKeyPrefix is the prefix of every Redis key unless one is given.
const DefaultKeyPrefix = "seckill"

// Keys names the Redis keys of the service, the lua-async queue's included:
// they are named in one place because an item's gate and its queue share
// the hash tag {item:ID}, so an item's scripts run on one Redis Cluster
// slot.
type Keys struct{ prefix string }

// NewKeys checks prefix ("" is DefaultKeyPrefix).
func NewKeys(prefix string) (Keys, error) {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	if strings.ContainsAny(prefix, "{} ") {
		return Keys{}, fmt.Errorf("key prefix %q must not contain braces or spaces: %w", prefix, stock.ErrInvalid)
	}
	return Keys{prefix: prefix}, nil
}

// Item is the common start of an item's keys.
func (k Keys) Item(id int64) string { return fmt.Sprintf("%s:{item:%d}", k.prefix, id) }

// Meta is the item's gate: stock, taken, sale window, sold-out mark.
func (k Keys) Meta(id int64) string { return k.Item(id) + ":meta" }

// Buyers maps each user holding a unit of the item to the order id.
func (k Keys) Buyers(id int64) string { return k.Item(id) + ":buyers" }

// Lock is the item's lock (the lock strategy).
func (k Keys) Lock(id int64) string { return k.Item(id) + ":lock" }

// Idem binds an Idempotency-Key of the item to a user and an order.
func (k Keys) Idem(id int64, key string) string { return k.Item(id) + ":idem:" + key }

// ClaimsMark says the item's Idempotency-Key claims are whole: it is set
// when the item is created and after the claims were restored from the
// database, so its absence means Redis lost them (see shop's
// restoreClaims). A bucketed item has one per bucket (BucketKeys).
func (k Keys) ClaimsMark(id int64) string { return k.Item(id) + ":claims" }

// Stream is the lua-async queue of an item's admitted orders.
func (k Keys) Stream(id int64) string { return k.Item(id) + ":orders" }

// Dead is the item's dead-letter stream.
func (k Keys) Dead(id int64) string { return k.Item(id) + ":dead" }

// Queued marks a lua-async order that is queued but not yet in the
// database ("user|unix ms"). It is in the item's slot, so the enqueue
// script writes it with the rest, atomically, on a Redis Cluster too.
func (k Keys) Queued(id int64, orderID string) string { return k.Item(id) + ":queued:" + orderID }

// OrderIndex names the item of a queued order, so the order can be found by
// id alone. It lies outside every item's slot, so no script writes it: it
// is written after the enqueue script admitted the order, and read only as
// a pointer to the item's Queued marker, which is the truth. An index left
// behind (the order written since, or never admitted) points at no marker
// and means nothing.
func (k Keys) OrderIndex(orderID string) string { return k.prefix + ":order:" + orderID }

// Released is the set of order ids whose unit the gate has taken back.
func (k Keys) Released(id int64) string { return k.Item(id) + ":released" }

// void marks an attempt that was handed back (see reserve.lua).
func (k Keys) void(id int64, orderID string) string { return k.Item(id) + ":void:" + orderID }

// Events is the pub/sub channel of sold-out and restock events.
func (k Keys) Events() string { return k.prefix + ":events" }

// WriterLease names a queue consumer's liveness key. Consumers read every
// item's stream, so the key belongs to no item's slot: it is used only in
// plain commands, never in a script with a stream.
func (k Keys) WriterLease(consumer string) string { return k.prefix + ":writer:" + consumer }

// HotKeys are the names of one item's keys on the order path, made once.
type HotKeys struct{ Meta, Buyers, Stream string }

// HotKeysCache holds each item's HotKeys: the hot path formats none.
type HotKeysCache struct{ m sync.Map } // int64 -> *HotKeys

// Get returns item id's HotKeys.
func (c *HotKeysCache) Get(k Keys, id int64) *HotKeys {
	if v, ok := c.m.Load(id); ok {
		return v.(*HotKeys)
	}
	h := &HotKeys{Meta: k.Meta(id), Buyers: k.Buyers(id), Stream: k.Stream(id)}
	c.m.Store(id, h)
	return h
}
