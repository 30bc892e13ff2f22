package shop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// installHook runs run, once, right after the rebuild's script that
// installs the bucket whose meta is meta has returned.
type installHook struct {
	armed atomic.Bool
	fired atomic.Bool
	meta  string
	run   func()
}

func (h *installHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *installHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := strings.ToLower(cmd.Name()); (n == "evalsha" || n == "eval") && h.armed.Load() {
			// A script's first key is its bucket's meta; the install has
			// six keys or more, no other script on a meta more than four.
			args := cmd.Args()
			nkeys := 0
			if len(args) > 3 {
				nkeys, _ = strconv.Atoi(fmt.Sprint(args[2]))
			}
			if nkeys >= 6 && args[3] == h.meta && h.fired.CompareAndSwap(false, true) {
				h.run()
			}
		}
		return err
	}
}

func (h *installHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A reservation in flight whose write fails while the item of several
// buckets is rebuilt: its hand-back lands after the rebuild installed the
// buyer's home bucket (which kept the reservation, its write still in
// flight then) and before it installed the order's release bucket, so its
// release finds that bucket missing. The rebuild must give the unit back
// once it has installed every bucket: after it, the gate holds exactly
// the stock less the orders in the database, with no reconcile. Before,
// the gate stayed a unit short until a reconcile.
func TestHandBackBetweenBucketInstallsIsExact(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rdb := b.Redis(t)
		hook := &installHook{}
		rdb.AddHook(hook)
		s := newTestService(t, b, Config{}, rdb)
		plain := b.Redis(t)
		const k, units = 3, 6
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "handback-race", Stock: units, Strategy: stock.StrategyLua, Buckets: k})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "sold"}); err != nil {
			t.Fatal(err)
		}
		// A reservation whose write is in flight, at home in bucket 0, its
		// unit released in bucket 2 (installed after bucket 0).
		user := "inflight"
		for i := 0; gate.HomeBucket(it.ID, k, user).B != 0; i++ {
			user = fmt.Sprintf("inflight-%d", i)
		}
		order := uuid.Must(uuid.NewV7()).String()
		for gate.ReleaseBucket(it.ID, k, order).B != 2 {
			order = uuid.Must(uuid.NewV7()).String()
		}
		home := gate.HomeBucket(it.ID, k, user)
		if _, err := s.gate.Reserve(ctx, home, user, order, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		other := gate.New(plain, s.keys, nil, nil)
		var back bool
		var handBackErr error
		hook.meta = s.keys.Bucket(home).Meta
		hook.run = func() { back, handBackErr = other.HandBack(ctx, home, user, order, "") }
		// Another bucket is lost: the whole item is rebuilt.
		if err := plain.Del(ctx, s.keys.Bucket(gate.Bucket{Item: it.ID, B: 1, K: k}).Meta).Err(); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(true)
		if err := s.lua.buildGate(ctx, it.ID); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(false)
		if !hook.fired.Load() || handBackErr != nil {
			t.Fatalf("the hand-back did not run between the installs (fired %v, err %v)", hook.fired.Load(), handBackErr)
		}
		if back {
			t.Errorf("the hand-back says its unit went back, with its release bucket missing")
		}
		if got, err := plain.HGet(ctx, s.keys.Bucket(home).Buyers, user).Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("after the rebuild the handed-back user holds %q (%v), want nothing", got, err)
		}
		v, err := s.gate.ReadBuckets(ctx, it.ID, k, false)
		if err != nil {
			t.Fatal(err)
		}
		// One order in the database, none in flight.
		if v.Stock != units || v.Taken != 1 || v.Free != units-1 {
			t.Errorf("after the rebuild: stock %d, taken %d, free %d; want %d, 1, %d (the handed-back unit free)", v.Stock, v.Taken, v.Free, units, units-1)
		}
		reconcileOK(t, s, it.ID)
	})
}
