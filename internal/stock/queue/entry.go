package queue

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// ParseEntry reads one stream entry written by enqueue.lua.
func ParseEntry(itemID int64, m redis.XMessage) (*store.Queued, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	q := &store.Queued{Entry: m.ID, ID: str("o"), ItemID: itemID, UserID: str("u"), Key: str("k")}
	ms, err := strconv.ParseInt(str("t"), 10, 64)
	if e := str("e"); e != "" && err == nil {
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
	return redis.XMessage{ID: q.Entry, Values: map[string]any{"o": q.ID, "u": q.UserID, "k": q.Key,
		"t": strconv.FormatInt(q.Created.UnixMilli(), 10), "e": strconv.FormatInt(q.Epoch, 10)}}
}
