//go:build drill

package room_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// A drill, not a test of the suite (build tag drill; it writes a million
// tickets to the machine's Redis under its own key prefix and removes
// them): Redis bytes per waiting ticket, from INFO memory's used_memory
// before and after, and the cap's effect (joins past it add nothing).
//
//	go test -tags drill -run TestDrillTicketBytes -v ./internal/room/
func TestDrillTicketBytes(t *testing.T) {
	b := testenv.Real(t)
	rdb := b.Universal(t)
	ctx := context.Background()
	n := 1_000_000
	if s := os.Getenv("DRILL_TICKETS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	r, err := room.New(rdb, 424242, &room.Options{KeyPrefix: b.KeyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background()) })
	if err := r.Setup(ctx, room.NewSeed().Commitment(), time.Hour); err != nil {
		t.Fatal(err)
	}
	used := func() int64 {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no used_memory")
		return 0
	}
	join := func(from, to int, cap int64) (ok, full int) {
		users := make([]string, 0, 1000)
		for i := from; i < to; i += 1000 {
			users = users[:0]
			for u := i; u < min(i+1000, to); u++ {
				users = append(users, fmt.Sprintf("user-%07d", u))
			}
			res, err := r.JoinManyCapped(ctx, users, time.Now(), cap)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range res {
				if x.Err == nil {
					ok++
				} else {
					full++
				}
			}
		}
		return ok, full
	}
	before := used()
	start := time.Now()
	ok, _ := join(0, n, 0)
	took := time.Since(start)
	after := used()
	var keys int64
	for _, k := range []string{"tickets", "users"} {
		_ = k
	}
	iter := rdb.Scan(ctx, 0, b.KeyPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if m, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result(); err == nil {
			keys += m
			t.Logf("MEMORY USAGE %s: %d B", iter.Val(), m)
		}
	}
	t.Logf("%d tickets (users like %q) in %v: used_memory +%d B = %.1f B a ticket; MEMORY USAGE of the room's keys %d B = %.1f B a ticket",
		ok, "user-0000001", took.Round(time.Millisecond), after-before, float64(after-before)/float64(ok), keys, float64(keys)/float64(ok))
	// The cap: joins past it add no ticket and no memory.
	capped := int64(ok)
	ok2, full := join(n, n+100_000, capped)
	grown := used() - after
	t.Logf("100000 more joins with the bound at %d: %d tickets, %d room_full, used_memory %+d B", capped, ok2, full, grown)
	if ok2 != 0 || full != 100_000 {
		t.Errorf("past the bound: %d tickets, %d full; want 0 and 100000", ok2, full)
	}
	var _ redis.UniversalClient = rdb
}
