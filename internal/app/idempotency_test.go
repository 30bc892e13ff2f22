package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// Replays are answered from the database when Redis has lost the key's
// claim and the buyer record: same user and key get the original order, a
// different user with the key gets 422, and nobody gets a second order.
// On a Redis Cluster too: the key's claim and the buyers share the item's
// slot, so one DEL removes both.
func TestIdempotencySurvivesRedisLoss(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Universal(t)
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 5, strategy)
				first, err := c.PlaceOrder(it.ID, "alice", "key-1")
				if err != nil || first.Status != 201 {
					t.Fatalf("first order: got %d %s %v", first.Status, first.Body, err)
				}
				var orig apptest.Order
				first.JSON(t, &orig)

				replay, _ := c.PlaceOrder(it.ID, "alice", "key-1")
				var again apptest.Order
				replay.JSON(t, &again)
				if replay.Status != 201 || again.ID != orig.ID || replay.Header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("replay: got %d id %s replayed=%q, want 201 id %s replayed=true",
						replay.Status, again.ID, replay.Header.Get("Idempotent-Replayed"), orig.ID)
				}

				ctx := context.Background()
				tag := fmt.Sprintf("%s:{item:%d}", b.KeyPrefix, it.ID)
				if err := rdb.Del(ctx, tag+":idem:key-1", tag+":buyers").Err(); err != nil {
					t.Fatalf("lose the key's claim and the buyers: %v", err)
				}

				replay, _ = c.PlaceOrder(it.ID, "alice", "key-1")
				again = apptest.Order{}
				replay.JSON(t, &again)
				if replay.Status != 201 || again.ID != orig.ID {
					t.Errorf("replay after Redis loss: got %d %s, want 201 with id %s", replay.Status, replay.Body, orig.ID)
				}
				if err := rdb.Del(ctx, tag+":idem:key-1", tag+":buyers").Err(); err != nil {
					t.Fatalf("lose the key's claim and the buyers: %v", err)
				}
				other, _ := c.PlaceOrder(it.ID, "bob", "key-1")
				if other.Status != 422 || other.ErrorCode() != "idempotency_conflict" {
					t.Errorf("key reused by another user after Redis loss: got %d %s, want 422 idempotency_conflict", other.Status, other.Body)
				}
				if got := c.AdminItem(t, it.ID); got.Sold != 1 || got.Remaining != 4 {
					t.Errorf("item: got sold %d remaining %d, want 1 and 4", got.Sold, got.Remaining)
				}
				// Bob can still buy under his own key: nothing was left reserved.
				if r, _ := c.PlaceOrder(it.ID, "bob", "key-2"); r.Status != 201 {
					t.Errorf("bob with his own key: got %d %s, want 201", r.Status, r.Body)
				}
			})
		}
	})
}
