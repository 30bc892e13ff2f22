package room_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// roomBytesPerUser joins n users (user ids from userID) before the
// opening, opens the room, and returns the Redis memory of all the room's
// keys (MEMORY USAGE ... SAMPLES 0, every element counted) per user. It
// needs a real Redis: miniredis has no MEMORY USAGE.
func roomBytesPerUser(tb testing.TB, n int, userID func(i int) string) float64 {
	tb.Helper()
	ctx := context.Background()
	b := testenv.Real(tb)
	rdb := b.Universal(tb)
	r, err := room.New(rdb, 1, &room.Options{KeyPrefix: b.KeyPrefix})
	if err != nil {
		tb.Fatal(err)
	}
	seed := room.NewSeed()
	setUp(tb, r, seed, time.Minute)
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := r.Join(ctx, userID(i), t0); err != nil {
					tb.Errorf("Join: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := r.Open(ctx, seed); err != nil {
		tb.Fatal(err)
	}
	var total int64
	keys := testenv.Keys(tb, rdb, b.KeyPrefix+":*")
	if len(keys) != 6 { // meta, users, tickets, rank, draw, leaves: nobody admitted yet
		tb.Fatalf("room keys %v, want 6", keys)
	}
	for _, k := range keys {
		used, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			tb.Fatalf("MEMORY USAGE %s: %v", k, err)
		}
		tb.Logf("%s: %d bytes", k, used)
		total += used
	}
	return float64(total) / float64(n)
}

func shortUser(i int) string { return fmt.Sprintf("user-%06d", i) }

// uuidUser is a 36-character user id, as a UUID-keyed shop would send.
func uuidUser(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919) }

// TestMemoryPerWaitingUser holds the room to its budget of 200 bytes of
// Redis a waiting user, on 5,000 users (enough for Redis to leave its
// compact small-hash encoding); BenchmarkRoomMemory measures 100,000.
func TestMemoryPerWaitingUser(t *testing.T) {
	t.Parallel()
	if got := roomBytesPerUser(t, 5000, shortUser); got > 200 {
		t.Errorf("%.1f bytes of Redis a waiting user, want at most 200", got)
	}
}

// BenchmarkRoomMemory reports the Redis memory of a waiting user with
// 100,000 users in the pre-queue (SECKILL_ROOM_MEMORY_USERS: another
// count, e.g. 1000000). Run it once:
//
//	go test -run XXX -bench RoomMemory -benchtime 1x ./internal/room/
func BenchmarkRoomMemory(b *testing.B) {
	users := 100_000
	if v := os.Getenv("SECKILL_ROOM_MEMORY_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SECKILL_ROOM_MEMORY_USERS=%q: want a positive count", v)
		}
		users = n
	}
	for _, c := range []struct {
		name string
		id   func(int) string
	}{{"user-id-11-bytes", shortUser}, {"user-id-36-bytes", uuidUser}} {
		b.Run(c.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = roomBytesPerUser(b, users, c.id)
			}
			b.ReportMetric(per, "bytes/user")
		})
	}
}
