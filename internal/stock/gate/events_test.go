package gate

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// eventually polls cond until it holds, failing the test after 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventsRestockHeardAfterRedisLostItsData: two instances' memos on one
// Redis. Each round one of them sells the item out (the other marks it
// from the event) and then restocks it; the other forgets the "sold out"
// from the restock event alone (the memos' safety expiry is a minute). In
// the third round Redis has lost every key of the service first, as after
// a restart without persistence: the restock is heard all the same. (Issue
// 20: restocks were numbered by a counter in Redis, which restarted at 1,
// and every instance ignored numbers at or below the highest it had seen.)
func TestEventsRestockHeardAfterRedisLostItsData(t *testing.T) {
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		keys, err := NewKeys(b.KeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var memos [2]*Memo
		var events [2]*Events
		for i := range memos {
			memos[i] = &Memo{}
			memos[i].SetSafety(time.Minute)
			events[i] = StartEvents(rdb, keys, memos[i], slog.New(slog.DiscardHandler))
			t.Cleanup(events[i].Close)
		}
		eventually(t, "both subscribed", func() bool { return memos[0].Subscribed() && memos[1].Subscribed() })
		const item = 42
		for round := 0; round < 3; round++ {
			seller, other := round%2, 1-round%2
			g := memos[seller].Generation(item)
			news, last := memos[seller].Mark(item, g)
			if !news {
				t.Fatalf("round %d: the mark was no news", round)
			}
			if err := events[seller].SoldOut(ctx, item, last, g); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the other instance marks the item sold out", func() bool { return memos[other].SoldOut(item) })
			if round == 2 {
				testenv.DeleteKeys(t, rdb, b.KeyPrefix+":*")
			}
			r := NewRestockID()
			memos[seller].Restocked(item, r)
			if memos[seller].SoldOut(item) {
				t.Fatalf("round %d: the restocking instance still says sold out", round)
			}
			if err := events[seller].Restock(ctx, item, r); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the other instance forgets the sold out", func() bool { return !memos[other].SoldOut(item) })
		}
	})
}
