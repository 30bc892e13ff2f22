package shop

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A dead letter that is not an order at all (no order id or user: written
// by hand, or its fields lost) stays in the dead-letter stream for an
// operator to look at; it must not stop the requeue of the others, now or
// in any later requeue.
func TestRequeueSkipsEntriesMissingTheirFields(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 10)
		rdb := b.Redis(t)
		dead := api.keys.Dead(it.ID)
		// The broken entry comes first, as a dead letter holds it: only the
		// dead-letter fields.
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: map[string]any{"entry": "1-1", "reason": "malformed entry", "at": "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
		o, _, err := api.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "Good"})
		if err != nil {
			t.Fatal(err)
		}
		// Park the good order as a dead letter, as a writer would.
		stream := api.keys.Stream(it.ID)
		msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("stream: %v %v", msgs, err)
		}
		vals := map[string]any{"entry": msgs[0].ID, "reason": "delivered more than 5 times without being persisted", "at": "2"}
		for k, v := range msgs[0].Values {
			vals[k] = v
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: vals}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XDel(ctx, stream, msgs[0].ID).Err(); err != nil {
			t.Fatal(err)
		}

		for round := 1; round <= 2; round++ {
			n, err := api.RequeueDeadLetters(ctx, it.ID)
			want := 1
			if round == 2 {
				want = 0
			}
			if err != nil || n != want {
				t.Errorf("requeue %d: got %d %v, want %d moved and no error", round, n, err, want)
			}
			if got, err := rdb.XLen(ctx, dead).Result(); err != nil || got != 1 {
				t.Errorf("dead letters after requeue %d: got %d %v, want the broken one only", round, got, err)
			}
		}
		asyncService(t, b, st, 1, time.Second, 0)
		awaitWritten(t, api, []string{o.ID}, 15*time.Second)
	})
}
