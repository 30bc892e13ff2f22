package room_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkJoinMany is the join script's cost in Redis: batches of new
// users (the opening's crowd) join a room before its opening, and it
// reports the script's own time a join as Redis counts it (INFO
// commandstats, EVALSHA's usec), the cost that decides how many joins a
// second one Redis core takes. Needs the machine's Redis:
//
//	go test -run XXX -bench JoinMany ./internal/room/
func BenchmarkJoinMany(b *testing.B) {
	for _, size := range []int{1, 20, 128} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			tb := testenv.Real(b)
			rdb := tb.Universal(b)
			r, err := room.New(rdb, 1, &room.Options{KeyPrefix: tb.KeyPrefix})
			if err != nil {
				b.Fatal(err)
			}
			setUp(b, r, room.NewSeed(), time.Hour)
			users := make([]string, size)
			n := 0
			usec0 := evalshaUsec(b, rdb)
			for b.Loop() {
				for i := range users {
					n++
					users[i] = fmt.Sprintf("user-%08d", n)
				}
				res, err := r.JoinMany(ctx, users, t0)
				if err != nil || res[size-1].Err != nil || res[size-1].Status.Ticket != int64(n) {
					b.Fatalf("JoinMany: %v %+v, want ticket %d", err, res[size-1], n)
				}
			}
			b.ReportMetric((evalshaUsec(b, rdb)-usec0)/float64(n), "script-µs/join")
		})
	}
}

// evalshaUsec is the Redis server's total EVALSHA time in µs.
func evalshaUsec(tb testing.TB, rdb redis.UniversalClient) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						tb.Fatal(err)
					}
					return f
				}
			}
		}
	}
	return 0
}
