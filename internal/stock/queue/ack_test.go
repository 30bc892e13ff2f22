package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// An acknowledgement that keeps failing (one item's stream unreachable,
// as its master would be on a Redis Cluster, for longer than the writer
// waits for it) leaves the persisted entries pending to the writer, which
// goes on with the other items, and reads them again (its own pending
// entries, "0", in the same blocking read as the other streams' new ones)
// as soon as the stream answers, finds them written, and acknowledges
// them: the queue drains within moments, not after the claim backstop,
// and nothing is written twice. On one Redis and on the embedded one: the
// one blocking read of every stream.
func TestFailedAckReadAgainAndFoundWritten(t *testing.T) {
	t.Parallel() // each backend has its own service, database and key prefix
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		t.Parallel()
		rdb := b.Universal(t)
		cut := &ackCut{}
		rdb.AddHook(cut)
		s := newService(t, b, rdb, queue.Config{Writers: 1, ClaimIdle: claimIdle})
		a, other := asyncItem(t, s, "unacked"), asyncItem(t, s, "other")
		keys, err := gate.NewKeys(b.KeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		awaitWritten(t, s, []string{place(t, s, a.ID, "warm-a"), place(t, s, other.ID, "warm-b")}, promptly)
		awaitDrained(t, rdb, keys.Stream(a.ID), promptly)
		cut.stream = keys.Stream(a.ID)

		// Longer than the writer's patience, and than promptly.
		const cutFor = 7 * time.Second
		cut.until.Store(time.Now().Add(cutFor).UnixNano())
		ids := []string{place(t, s, a.ID, "cut-0"), place(t, s, a.ID, "cut-1")}
		awaitWritten(t, s, ids, promptly) // committed; the acknowledgement fails
		for start := time.Now(); cut.refused.Load() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > promptly {
				t.Fatal("no acknowledgement was refused: is the hook seeing it?")
			}
		}
		// Meanwhile the other item's orders are written: the writer
		// does not wait for the acknowledgement.
		awaitWritten(t, s, []string{place(t, s, other.ID, "meanwhile")}, promptly)
		awaitDrained(t, rdb, keys.Stream(a.ID), cutFor+promptly)
		it, err := s.Item(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if it.Sold != 3 {
			t.Errorf("sold %d, want 3: an entry read again was written again", it.Sold)
		}
		for i := range 2 {
			awaitWritten(t, s, []string{place(t, s, a.ID, fmt.Sprintf("after-%d", i))}, promptly)
		}
	})
}

// ackCut refuses every MULTI that acknowledges entries (XACK) of stream
// until the time in until, as if Redis did not answer.
type ackCut struct {
	stream  string       // set before until
	until   atomic.Int64 // unix ns
	refused atomic.Int64
}

func (h *ackCut) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *ackCut) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *ackCut) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if time.Now().UnixNano() < h.until.Load() {
			for _, c := range cmds {
				if c.Name() == "xack" && c.Args()[1] == h.stream {
					h.refused.Add(1)
					err := errors.New("ackCut: redis unreachable")
					for _, c := range cmds {
						c.SetErr(err)
					}
					return err
				}
			}
		}
		return next(ctx, cmds)
	}
}
