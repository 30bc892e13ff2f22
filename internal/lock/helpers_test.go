package lock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv"
)

func TestMain(m *testing.M) {
	// Outside CI, without Redis, every test that needs it skips with the
	// reason (see unavailable), so the run says what it did not check. The
	// runnable examples cannot skip, so they are left out. In CI it fails.
	flag.Parse()
	if err := pingRedis(); err != nil {
		sharedRedisDown = err
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "FAIL: CI=true and Redis at %s unreachable: %v\n", redisURL(), err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "SKIP: Redis at %s unreachable (%v): tests that need it skip, examples do not run; set SECKILL_TEST_REDIS_URL. In CI this fails.\n", redisURL(), err)
		skip := "^Example"
		if cur := flag.Lookup("test.skip").Value.String(); cur != "" {
			skip = cur + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: leave the examples out: %v\n", err)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m)
}

// sharedRedisDown is why the shared test Redis did not answer TestMain's
// ping, nil when it did: tests that need it then skip at once.
var sharedRedisDown error

func pingRedis() error {
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

func redisURL() string {
	if u := os.Getenv("SECKILL_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// unavailable fails the test in CI (CI=true) and skips it elsewhere.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		tb.Fatalf("CI=true and %s", msg)
	}
	tb.Skipf("skipping: %s (set SECKILL_TEST_REDIS_URL; in CI this fails)", msg)
}

// newRedis returns a client for the shared test Redis, closed at cleanup.
func newRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		tb.Fatalf("SECKILL_TEST_REDIS_URL: %v", err)
	}
	if sharedRedisDown != nil {
		unavailable(tb, "Redis at %s unreachable: %v", opt.Addr, sharedRedisDown)
	}
	return dial(tb, opt)
}

func dial(tb testing.TB, opt *redis.Options) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		unavailable(tb, "Redis at %s unreachable: %v", opt.Addr, err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// testKey returns a key unique to this test run and deletes, at cleanup, every
// key whose name contains it (lock, fence, release record, fair queue).
func testKey(tb testing.TB, rdb *redis.Client) string {
	tb.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := "locktest:" + hex.EncodeToString(b)
	tb.Cleanup(func() { deleteMatching(tb, rdb, "*"+id+"*") })
	return id
}

func deleteMatching(tb testing.TB, rdb *redis.Client, pattern string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			tb.Errorf("cleanup %s: %v", iter.Val(), err)
		}
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("cleanup scan: %v", err)
	}
}

// privateRedis starts a throw-away redis-server on a free loopback port, for
// tests that flush scripts or kill the server; it is stopped at cleanup.
func privateRedis(tb testing.TB, extraArgs ...string) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(testenv.PrivateRedis(tb, extraArgs...))
	if err != nil {
		tb.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func pttl(tb testing.TB, rdb *redis.Client, key string) time.Duration {
	tb.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		tb.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

func exists(tb testing.TB, rdb *redis.Client, key string) bool {
	tb.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		tb.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

// fencedStore simulates the guarded resource: a Redis value that accepts a
// write only with a fence greater than every fence it has seen.
var fencedWrite = redis.NewScript(`
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) <= seen then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1`)

func writeFenced(tb testing.TB, rdb *redis.Client, key string, fence int64, value string) bool {
	tb.Helper()
	n, err := fencedWrite.Run(context.Background(), rdb, []string{key}, fence, value).Int()
	if err != nil {
		tb.Fatalf("fenced write: %v", err)
	}
	return n == 1
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
