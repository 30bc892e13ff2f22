package queue

import (
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/store"
)

// An entry parked as a dead letter (message) reads back as the order it
// was (ParseEntry), and entries that are no order are refused.
func TestEntryRoundTrip(t *testing.T) {
	q := &store.Queued{Entry: "1-0", ID: "0190c6a4-4c6e-7000-8000-000000000001", ItemID: 7, UserID: "alice",
		Key: "k1", Created: time.UnixMilli(1_700_000_000_123).UTC(), Epoch: 3}
	got, err := ParseEntry(7, message(q))
	if err != nil {
		t.Fatalf("ParseEntry: %v", err)
	}
	if !reflect.DeepEqual(got, q) {
		t.Errorf("round trip: got %+v, want %+v", got, q)
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"no order id", map[string]any{FieldUser: "alice", FieldTime: "1"}},
		{"bad user", map[string]any{FieldOrder: q.ID, FieldUser: "a b", FieldTime: "1"}},
		{"bad time", map[string]any{FieldOrder: q.ID, FieldUser: "alice", FieldTime: "soon"}},
		{"bad epoch", map[string]any{FieldOrder: q.ID, FieldUser: "alice", FieldTime: "1", FieldEpoch: "x"}},
	} {
		if _, err := ParseEntry(7, redis.XMessage{ID: "2-0", Values: tc.values}); err == nil {
			t.Errorf("%s: got no error, want malformed", tc.name)
		}
	}
}
