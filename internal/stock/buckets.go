package stock

import "hash/fnv"

// HomeBucketOf is the bucket, of an item's k, that a name (a user id, an
// order id, an Idempotency-Key) falls in: FNV-1a of the name modulo k,
// always the same. A buyer's home bucket (the user id's) is both the Redis
// gate bucket that holds the buyer's reservation and the database row
// (item_stock) that the buyer's order takes its unit from.
func HomeBucketOf(name string, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(k))
}
