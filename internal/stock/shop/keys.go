package shop

import (
	"fmt"
	"strings"
	"sync"

	"github.com/seckill/seckill/internal/stock"
)

// keyspace names the Redis keys of the service. Every key of one item shares
// the hash tag {item:ID}, so an item's scripts run on one Redis Cluster slot.
type keyspace struct{ prefix string }

func newKeyspace(prefix string) (keyspace, error) {
	if prefix == "" {
		prefix = "seckill"
	}
	if strings.ContainsAny(prefix, "{} ") {
		return keyspace{}, fmt.Errorf("key prefix %q must not contain braces or spaces: %w", prefix, stock.ErrInvalid)
	}
	return keyspace{prefix: prefix}, nil
}

func (k keyspace) item(id int64) string             { return fmt.Sprintf("%s:{item:%d}", k.prefix, id) }
func (k keyspace) meta(id int64) string             { return k.item(id) + ":meta" }
func (k keyspace) buyers(id int64) string           { return k.item(id) + ":buyers" }
func (k keyspace) lock(id int64) string             { return k.item(id) + ":lock" }
func (k keyspace) idem(id int64, key string) string { return k.item(id) + ":idem:" + key }

// stream is the lua-async queue of an item's admitted orders, dead its
// dead-letter stream.
func (k keyspace) stream(id int64) string { return k.item(id) + ":orders" }
func (k keyspace) dead(id int64) string   { return k.item(id) + ":dead" }

// pending marks a lua-async order that is queued but not yet in the
// database, so it can be found by id alone. It lives outside the item's
// slot: lua-async needs one Redis (a primary), not a Cluster.
func (k keyspace) pending(orderID string) string { return k.prefix + ":order:" + orderID }

// released is the set of order ids whose unit the gate has taken back.
func (k keyspace) released(id int64) string { return k.item(id) + ":released" }

// restocks counts the item's restock events (see events.go).
func (k keyspace) restocks(id int64) string { return k.item(id) + ":restocks" }

// events is the pub/sub channel of sold-out and restock events.
func (k keyspace) events() string { return k.prefix + ":events" }

// gateKeys are the names of one item's gate keys, made once per item.
type gateKeys struct{ meta, buyers, stream string }

// gateKeysCache holds each item's gateKeys: the hot path formats none.
type gateKeysCache struct{ m sync.Map } // int64 -> *gateKeys

func (c *gateKeysCache) get(k keyspace, id int64) *gateKeys {
	if v, ok := c.m.Load(id); ok {
		return v.(*gateKeys)
	}
	g := &gateKeys{meta: k.meta(id), buyers: k.buyers(id), stream: k.stream(id)}
	c.m.Store(id, g)
	return g
}
