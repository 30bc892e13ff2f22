package shop

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// Promise 4 on a lua-async item with buckets (found by TestConcurrencyProof,
// lua-async on 4 buckets): a keyed request claims its key naming order X
// and enqueues X; its twin with the same key, on another instance, reads
// the claim, finds X nowhere yet and enqueues X itself (claimAsync's
// rerun). The first request's script found the home bucket empty; the
// twin's Rebalance then moved the last unit there and the twin queued X
// (202); the first request's Rebalance found the item sold out, and it
// answered sold_out to the key whose twin got 202. twinBetween runs the
// twin at exactly that moment: after the first request's script said
// sold_out, before its Rebalance.
func TestAsyncRerunTwinTakesTheLastUnit(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		rdb := b.Redis(t)
		s1, s2 := newTestServiceOn(t, b, st, Config{}, rdb), newTestServiceOn(t, b, st, Config{}, nil)
		it := createBucketedAs(t, s2, stock.StrategyLuaAsync, 2, 2) // a unit a bucket
		home := gate.HomeBucket(it.ID, 2, "alice").B
		neighbour := ""
		for i := 0; neighbour == ""; i++ {
			if u := fmt.Sprintf("v%d", i); gate.HomeBucket(it.ID, 2, u).B == home {
				neighbour = u
			}
		}
		if _, _, err := s2.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: neighbour}); err != nil {
			t.Fatalf("%s takes the unit of alice's home bucket: %v", neighbour, err)
		}
		req := stock.OrderRequest{ItemID: it.ID, UserID: "alice", IdempotencyKey: "alice-1"}
		var twin struct {
			o   *stock.Order
			err error
			ran atomic.Bool
		}
		rdb.AddHook(twinBetween{after: func() {
			if twin.ran.CompareAndSwap(false, true) {
				twin.o, _, twin.err = s2.PlaceOrder(ctx, req)
			}
		}})
		o, replayed, err := s1.PlaceOrder(ctx, req)
		if !twin.ran.Load() {
			t.Fatal("the twin never ran: alice's enqueue was not refused sold_out")
		}
		if twin.err != nil {
			t.Fatalf("the twin, which took the unit moved to alice's bucket: %v", twin.err)
		}
		if err != nil || !replayed || o.ID != twin.o.ID {
			t.Fatalf("alice's first request: got %+v replayed %v %v; want the twin's order %s, replayed", o, replayed, err, twin.o.ID)
		}
		if got, replayed, err := s1.PlaceOrder(ctx, req); err != nil || !replayed || got.ID != twin.o.ID {
			t.Errorf("alice's key again: got %+v replayed %v %v; want order %s", got, replayed, err, twin.o.ID)
		}
	})
}

// twinBetween is a go-redis hook that calls after once an enqueue by alice
// has been answered sold_out, before her request sees the answer.
type twinBetween struct{ after func() }

func (h twinBetween) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h twinBetween) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(cmd)
		return err
	}
}

func (h twinBetween) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.check(cmd)
		}
		return err
	}
}

func (h twinBetween) check(cmd redis.Cmder) {
	c, ok := cmd.(*redis.Cmd)
	if !ok || !slices.Contains([]string{"evalsha", "eval"}, cmd.Name()) || !slices.Contains(cmd.Args(), any("alice")) {
		return
	}
	if res, err := c.StringSlice(); err == nil && len(res) == 2 && res[0] == "sold_out" {
		h.after()
	}
}
