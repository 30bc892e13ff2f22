package shop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// readAsDeadWriter makes a consumer read every entry of the stream and
// acknowledge nothing, as a writer killed mid-batch leaves them. It never
// had a lease (as one whose lease has expired).
func readAsDeadWriter(t *testing.T, rdb *redis.Client, stream, consumer string, want int) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, stream, queue.Group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	read, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: queue.Group, Consumer: consumer,
		Streams: []string{stream, ">"}, Count: 1000}).Result()
	if err != nil || len(read) != 1 || len(read[0].Messages) != want {
		t.Fatalf("dead writer read %v %v, want %d entries", read, err, want)
	}
}

// The entries of a writer whose lease is gone are taken over within about
// a lease, not after ClaimIdle (30 s by default here): before the leases,
// survivors waited the whole ClaimIdle.
func TestDeadWriterTakenOverWithinALease(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 100)
		ids := placeAsync(t, api, it.ID, "u", 50)
		rdb := b.Redis(t)
		readAsDeadWriter(t, rdb, api.keys.Stream(it.ID), "killed-host-1-abc-w0", 50)

		start := time.Now()
		asyncService(t, b, st, 1, 30*time.Second, 0)
		awaitWritten(t, api, ids, 10*time.Second)
		took := time.Since(start)
		t.Logf("50 orders of a dead writer written %v after a survivor started", took.Round(time.Millisecond))

		// Each entry was delivered twice (the dead writer, the survivor),
		// and the dead writer is gone from the group.
		ctx := context.Background()
		infos, err := rdb.XInfoConsumers(ctx, api.keys.Stream(it.ID), queue.Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range infos {
			if c.Name == "killed-host-1-abc-w0" {
				t.Errorf("the dead writer is still a consumer of the group: %+v", c)
			}
		}
		if got, err := st.Item(ctx, it.ID); err != nil || got.Sold != 50 {
			t.Errorf("sold: got %+v %v, want 50", got, err)
		}
	})
}

// Survivors racing to take over the same dead writer claim each entry once:
// one more delivery per entry, never one per survivor (which would bring a
// healthy order closer to the dead-letter stream with every crash).
func TestConcurrentTakeoversClaimEachEntryOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 100)
		placeAsync(t, api, it.ID, "u", 60)
		rdb := b.Redis(t)
		stream := api.keys.Stream(it.ID)
		readAsDeadWriter(t, rdb, stream, "dead", 60)

		const takers = 8
		var mu sync.Mutex
		claimedBy := map[string]string{}
		var wg sync.WaitGroup
		for i := 0; i < takers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				taker := fmt.Sprintf("taker%d", i)
				res, err := queue.TakeoverScript().Run(ctx, rdb, []string{stream}, queue.Group, "dead", taker, 0, 500).Slice()
				if err != nil {
					t.Errorf("%s: takeover: %v", taker, err)
					return
				}
				_, msgs, err := queue.ParseTakeover(res)
				if err != nil {
					t.Errorf("%s: %v", taker, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					if prev, ok := claimedBy[m.ID]; ok {
						t.Errorf("entry %s claimed by %s and %s", m.ID, prev, taker)
					}
					claimedBy[m.ID] = taker
				}
			}()
		}
		wg.Wait()
		if len(claimedBy) != 60 {
			t.Errorf("got %d entries claimed, want 60", len(claimedBy))
		}
		pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: queue.Group, Start: "-", End: "+", Count: 1000}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pend {
			if p.RetryCount != 2 || p.Consumer != claimedBy[p.ID] {
				t.Errorf("entry %s: delivered %d times, owned by %s; want 2, %s", p.ID, p.RetryCount, p.Consumer, claimedBy[p.ID])
			}
		}
		infos, err := rdb.XInfoConsumers(ctx, stream, queue.Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range infos {
			if c.Name == "dead" {
				t.Errorf("the dead writer is still a consumer: %+v", c)
			}
		}
	})
}

// A renewal keeps an entry's delivery count and never takes an entry back
// from the writer that claimed it meanwhile.
func TestRenewKeepsCountAndOwnership(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 10)
		placeAsync(t, api, it.ID, "u", 2)
		rdb := b.Redis(t)
		stream := api.keys.Stream(it.ID)
		readAsDeadWriter(t, rdb, stream, "a", 2)
		pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: queue.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(pend) != 2 {
			t.Fatalf("pending: %v %v", pend, err)
		}
		// b claims the second entry.
		if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: stream, Group: queue.Group, Consumer: "b", Messages: []string{pend[1].ID}}).Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := queue.RenewScript().Run(ctx, rdb, []string{stream}, queue.Group, "a", 500).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: queue.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(got) != 2 {
			t.Fatalf("pending: %v %v", got, err)
		}
		if got[0].Consumer != "a" || got[0].RetryCount != 1 {
			t.Errorf("renewed entry: owner %s, delivered %d times; want a, 1", got[0].Consumer, got[0].RetryCount)
		}
		if got[1].Consumer != "b" || got[1].RetryCount != 2 {
			t.Errorf("claimed entry: owner %s, delivered %d times; want b, 2", got[1].Consumer, got[1].RetryCount)
		}
	})
}

// A database stall longer than the lease and than ClaimIdle (2 s, below
// the 5 s floor SECKILL_CLAIM_IDLE allows), with two writer processes: the writer holding the batch keeps its
// lease and renews its claim while the transaction waits, so no entry is
// stolen, none bounces between writers, nothing is dead-lettered, and all
// is written once the stall ends. Before, the claim was renewed only
// between attempts: a 5 s attempt let the other process steal it.
func TestDatabaseStallStealsNothing(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	ctx := context.Background()
	st := newTestStore(t, b, nil)
	api := asyncService(t, b, st, 0, 0, 0)
	it := createAsyncItem(t, api, 100)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 0; i < 2; i++ {
		s, err := NewService(st, b.Redis(t), Config{KeyPrefix: b.KeyPrefix, Logger: quiet,
			Queue: queue.Config{Writers: 2, ClaimIdle: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
	}
	awaitWritten(t, api, placeAsync(t, api, it.ID, "before", 2), 10*time.Second)

	// The stall: another transaction holds the item row.
	db, err := b.DB(t).DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sold int64
	if err := tx.QueryRowContext(ctx, "SELECT sold FROM items WHERE id = ? FOR UPDATE", it.ID).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = tx.Rollback()
		}
	}
	defer release()
	ids := placeAsync(t, api, it.ID, "during", 40)

	rdb := b.Redis(t)
	stream := api.keys.Stream(it.ID)
	const stall = 6 * time.Second // past one 5 s attempt, three ClaimIdles
	maxCount, owners := watchPendingDuring(t, rdb, stream, stall)
	release()
	awaitWritten(t, api, ids, 20*time.Second)

	t.Logf("during the %v stall: entries owned by %v, most deliveries of one entry %d", stall, owners, maxCount)
	if maxCount > 1 {
		t.Errorf("an entry was delivered %d times during the stall; want 1: a live writer's claim was stolen", maxCount)
	}
	dl, err := api.DeadLetters(ctx, it.ID, 100)
	if err != nil || len(dl) != 0 {
		t.Errorf("dead letters: got %d %v, want none", len(dl), err)
	}
	if got, err := st.Item(ctx, it.ID); err != nil || got.Sold != 42 {
		t.Errorf("sold: got %+v %v, want 42", got, err)
	}
}

// watchPendingDuring polls the stream's pending entries for d and returns the most
// deliveries seen of one entry and the consumers seen owning entries.
func watchPendingDuring(t *testing.T, rdb *redis.Client, stream string, d time.Duration) (int64, map[string]bool) {
	t.Helper()
	ctx := context.Background()
	var maxCount int64
	owners := map[string]bool{}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: queue.Group, Start: "-", End: "+", Count: 1000}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pend {
			maxCount = max(maxCount, p.RetryCount)
			owners[p.Consumer] = true
		}
	}
	return maxCount, owners
}

// Consumers that processes left behind owning nothing (every start adds
// some) are removed from the group once their lease is gone; a live
// process's are kept.
func TestIdleConsumersOfGoneProcessesForgotten(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 10)
		rdb := b.Redis(t)
		stream := api.keys.Stream(it.ID)
		if err := rdb.XGroupCreateMkStream(ctx, stream, queue.Group, "0").Err(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"gone-1-aa-w0", "gone-1-aa-claim"} {
			if err := rdb.XGroupCreateConsumer(ctx, stream, queue.Group, c).Err(); err != nil {
				t.Fatal(err)
			}
		}
		live := asyncService(t, b, st, 1, 400*time.Millisecond, 0)
		ids := placeAsync(t, api, it.ID, "u", 3)
		awaitWritten(t, api, ids, 10*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			infos, err := rdb.XInfoConsumers(ctx, stream, queue.Group).Result()
			if err != nil {
				t.Fatal(err)
			}
			var gone, mine []string
			for _, c := range infos {
				if strings.HasPrefix(c.Name, "gone-") {
					gone = append(gone, c.Name)
				} else if strings.HasPrefix(c.Name, live.queue.ConsumerPrefix()) {
					mine = append(mine, c.Name)
				}
			}
			if len(gone) == 0 {
				if len(mine) == 0 {
					t.Errorf("the live process's consumers were removed too: %+v", infos)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumers of a gone process still in the group after 10s: %v", gone)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
