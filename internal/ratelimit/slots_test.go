package ratelimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/testenv"
)

// The limiter's script (redis_rate's GCRA) declares one key, so it runs on a
// Redis Cluster whatever the key: testenv.SlotCheck sees every script call,
// for keys with and without braces, and the limit still holds.
func TestLimiterScriptTakesKeysOfOneSlot(t *testing.T) {
	b := testenv.Real(t)
	check := &testenv.SlotCheck{}
	rdb := b.Redis(t)
	rdb.AddHook(check)
	l := ratelimit.New(rdb, b.KeyPrefix+":ratelimit:", ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 2}, nil)
	ctx := context.Background()
	for _, key := range []string{"user:alice", "user:{bob}", "user:}{", "ip:127.0.0.1"} {
		for i, want := range []bool{true, true, false} {
			wait, err := l.Allow(ctx, key)
			if err != nil {
				t.Fatalf("%s: Allow: %v", key, err)
			}
			if got := wait == 0; got != want {
				t.Errorf("%s: attempt %d admitted %v, want %v (burst 2)", key, i+1, got, want)
			}
		}
	}
	if v := check.Violations(); len(v) > 0 {
		t.Errorf("commands whose keys span slots:\n%s", strings.Join(v, "\n"))
	}
	if n := check.Scripts(); n < 12 {
		t.Errorf("checked %d script calls, want 12 (one per Allow)", n)
	}
}
