package queue

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// The fields of a stream entry, as enqueue.lua writes them; requeue.lua
// keeps them when it moves a dead letter back. Both scripts name them too
// (a comment in each points here): change them together.
const (
	FieldOrder = "o" // order id
	FieldUser  = "u" // user id
	FieldKey   = "k" // Idempotency-Key, "" = none
	FieldTime  = "t" // when the gate admitted it, unix ms
	FieldEpoch = "e" // the queue epoch of the gate that admitted it
)

// The fields a dead letter adds to its entry's.
const (
	FieldDeadEntry  = "entry"  // the entry's id in the order stream
	FieldDeadReason = "reason" // why it was parked
	FieldDeadAt     = "at"     // when, unix ms
)

// ParseEntry reads one stream entry written by enqueue.lua.
func ParseEntry(itemID int64, m redis.XMessage) (*store.Queued, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	q := &store.Queued{Entry: m.ID, ID: str(FieldOrder), ItemID: itemID, UserID: str(FieldUser), Key: str(FieldKey)}
	ms, err := strconv.ParseInt(str(FieldTime), 10, 64)
	if e := str(FieldEpoch); e != "" && err == nil {
		q.Epoch, err = strconv.ParseInt(e, 10, 64)
	}
	if err != nil || !stock.ValidOrderID(q.ID) || !stock.ValidUserID(q.UserID) || len(q.Key) > stock.MaxIdemKeyLen {
		return nil, fmt.Errorf("malformed entry %s: %v", m.ID, m.Values)
	}
	q.Created = time.UnixMilli(ms).UTC()
	return q, nil
}

// message is q as a stream entry again (for the dead-letter stream).
func message(q *store.Queued) redis.XMessage {
	return redis.XMessage{ID: q.Entry, Values: map[string]any{FieldOrder: q.ID, FieldUser: q.UserID, FieldKey: q.Key,
		FieldTime: strconv.FormatInt(q.Created.UnixMilli(), 10), FieldEpoch: strconv.FormatInt(q.Epoch, 10)}}
}
