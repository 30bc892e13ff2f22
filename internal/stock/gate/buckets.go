package gate

import (
	"fmt"
	"strings"
	"sync"

	"github.com/seckill/seckill/internal/stock"
)

// An item created with buckets K > 1 splits its stock over K gates, the
// buckets, each under its own hash tag so that on a Redis Cluster each
// lives in its own slot, and the K slots fall in K different equal slot
// ranges (on a cluster whose slots are spread in equal contiguous ranges,
// the default, K different masters when K is the number of masters).
//
// Bucket 0's tag is the item's tag of old, {item:ID}, so an item with one
// bucket is what every item was before buckets. Bucket b > 0 is tagged
// {item:ID:b:N} with the smallest N that puts its slot in the middle half
// of the range after bucket 0's by b (modulo K): every instance computes
// the same tags from (ID, b, K) alone.
//
// A buyer's home bucket (HomeBucket) holds the buyer's reservation, so the
// one-unit-per-buyer rule runs in one slot as before. Units, not buyers,
// move between buckets (see Gate.Rebalance).

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// Bucket names one of an item's gate buckets: bucket B of K.
type Bucket struct {
	Item int64
	B, K int
}

// Single is the one bucket of an item with buckets = 1 (and of every item
// made before buckets).
func Single(itemID int64) Bucket { return Bucket{Item: itemID, B: 0, K: 1} }

// HomeBucket is userID's bucket of an item with k buckets: always the same
// (stock.HomeBucketOf), and the same bucket row in the database, which the
// user's order takes its unit from (store, "Bucket rows").
func HomeBucket(itemID int64, k int, userID string) Bucket {
	return Bucket{Item: itemID, B: spread(userID, k), K: max(1, k)}
}

// ReleaseBucket is the bucket a cancelled order's unit goes back to. It is
// chosen by the order id, so every release of one order (the request's,
// the sweeper's retries, on any instance) checks one released set.
func ReleaseBucket(itemID int64, k int, orderID string) Bucket { return PickBucket(itemID, k, orderID) }

// PickBucket is the bucket a name (an order id, an Idempotency-Key) picks
// among an item's k: always the same, spread evenly.
func PickBucket(itemID int64, k int, name string) Bucket {
	return Bucket{Item: itemID, B: spread(name, k), K: max(1, k)}
}

// AllBuckets lists an item's k buckets.
func AllBuckets(itemID int64, k int) []Bucket {
	k = max(1, k)
	out := make([]Bucket, k)
	for b := range out {
		out[b] = Bucket{Item: itemID, B: b, K: k}
	}
	return out
}

func spread(s string, k int) int { return stock.HomeBucketOf(s, k) }

// tags caches bucket tags: finding one costs up to a few hundred CRC16s.
var tags sync.Map // Bucket -> string

// Tag is the hash tag (without braces) of bucket bk.
func (bk Bucket) Tag() string {
	if bk.B == 0 || bk.K <= 1 {
		return fmt.Sprintf("item:%d", bk.Item)
	}
	if v, ok := tags.Load(bk); ok {
		return v.(string)
	}
	home := Slot(fmt.Sprintf("item:%d", bk.Item)) * bk.K / SlotCount
	r := (home + bk.B) % bk.K
	lo, hi := r*SlotCount/bk.K, (r+1)*SlotCount/bk.K // [lo, hi)
	// The middle half of the range: a cluster whose ranges are cut a slot
	// or two differently still puts the tag on the same master.
	mlo, mhi := lo+(hi-lo)/4, hi-(hi-lo)/4
	for n := 0; ; n++ {
		t := fmt.Sprintf("item:%d:%d:%d", bk.Item, bk.B, n)
		if s := Slot(t); s >= mlo && s < mhi {
			tags.Store(bk, t)
			return t
		}
	}
}

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key's
// hash tag (the text between the first '{' and the next '}', if not
// empty) or of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % SlotCount)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for bit := 0; bit < 8; bit++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// BucketKeys are the names of one bucket's keys. Every one carries the
// bucket's tag, so each script that touches them runs in one slot.
type BucketKeys struct {
	Meta     string // stock, taken, sale window, sold-out mark, moves
	Buyers   string // user -> order id, of the buyers whose home this is
	Released string // order ids whose unit came back to this bucket
	Out      string // transfers out of this bucket not yet finished: id -> "to m unix-ms"
	In       string // ids of the transfers this bucket received
	// Stream and Dead: a lua-async item's queue of the orders of the
	// buyers whose home this bucket is, and its dead-letter stream (bucket
	// 0's are the item's of old, Keys.Stream and Keys.Dead).
	Stream, Dead string
	// ClaimsMark: the claims of the Idempotency-Keys this bucket holds are
	// whole (see Keys.ClaimsMark).
	ClaimsMark string
	base       string
}

// Bucket names bucket bk's keys. Bucket 0's are the item's keys of old
// (Meta, Buyers, Released).
// The names are made once per bucket: the order path formats none.
func (k Keys) Bucket(bk Bucket) BucketKeys {
	id := bucketKeysID{k.prefix, bk}
	if v, ok := bucketKeys.Load(id); ok {
		return *v.(*BucketKeys)
	}
	base := k.prefix + ":{" + bk.Tag() + "}"
	bks := &BucketKeys{Meta: base + ":meta", Buyers: base + ":buyers", Released: base + ":released",
		Out: base + ":moves:out", In: base + ":moves:in", ClaimsMark: base + ":claims",
		Stream: base + ":orders", Dead: base + ":dead", base: base}
	bucketKeys.Store(id, bks)
	return *bks
}

type bucketKeysID struct {
	prefix string
	bk     Bucket
}

// bucketKeys caches BucketKeys; an entry is a few hundred bytes, one per
// bucket of every item sold since the process started.
var bucketKeys sync.Map // bucketKeysID -> *BucketKeys

// BucketLock is the key of the lock strategy's lock of bucket bk (the
// item's lock, Keys.Lock, for bucket 0), with the bucket's tag.
func (k Keys) BucketLock(bk Bucket) string { return k.Bucket(bk).base + ":lock" }

// Idem binds an Idempotency-Key of the item to a user and an order, in
// this bucket (the shop picks the bucket by the key).
func (b BucketKeys) Idem(key string) string { return b.base + ":idem:" + key }

// Queued marks a lua-async order queued in this bucket's stream and not
// yet in the database (see Keys.Queued, which is bucket 0's).
func (b BucketKeys) Queued(orderID string) string { return b.base + ":queued:" + orderID }

// void marks an attempt of this bucket that was handed back (see reserve.lua).
func (b BucketKeys) void(orderID string) string { return b.base + ":void:" + orderID }
