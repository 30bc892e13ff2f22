package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// BenchmarkContended: g goroutines take turns on one key; one op = one
// acquisition + release (no work under the lock). Modes:
//
//	wakeup  - Obtain with Wait; woken by the release's PUBLISH (the default)
//	backoff - Obtain with Wait and NoWakeup: capped exponential backoff only
//	spin    - naive loop: SET NX PX retried without sleeping, then a
//	          compare-and-delete script (the seed's approach, minus its bugs)
//
// Reported: acq/s, cpu-µs/acq of this process (user+sys, all goroutines,
// from getrusage) and redis-cpu-µs/acq (server used_cpu_user+sys deltas; the
// server is shared, so that figure is an upper bound).
func BenchmarkContended(b *testing.B) {
	for _, mode := range []string{"wakeup", "backoff", "spin"} {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/g=%d", mode, g), func(b *testing.B) { benchContended(b, mode, g, 0) })
		}
	}
}

// BenchmarkOrders models the service: each op = obtain + 0.5ms of "DB
// transaction" (a sleep, no CPU) + release, on one hot key.
func BenchmarkOrders(b *testing.B) {
	for _, mode := range []string{"wakeup", "backoff", "spin"} {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/g=%d", mode, g), func(b *testing.B) { benchContended(b, mode, g, 500*time.Microsecond) })
		}
	}
}

var spinRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func benchContended(b *testing.B, mode string, goroutines int, hold time.Duration) {
	ctx := context.Background()
	rdb := newRedis(b)
	var attempts attemptCounter
	c := newClient(b, rdb, &lock.ClientOptions{Observer: &attempts})
	key := testKey(b, rdb)
	opt := &lock.Options{Wait: time.Minute, NoWakeup: mode == "backoff"}

	acquire := func(token string) (release func() error, err error) {
		if mode == "spin" {
			for {
				attempts.attempts.Add(1)
				ok, err := rdb.SetNX(ctx, key, token, 10*time.Second).Result()
				if err != nil {
					return nil, err
				}
				if ok {
					return func() error { return spinRelease.Run(ctx, rdb, []string{key}, token).Err() }, nil
				}
			}
		}
		l, err := c.Obtain(ctx, key, 10*time.Second, opt)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	}

	var (
		next   atomic.Int64
		inside atomic.Int32
		wg     sync.WaitGroup
		failed atomic.Value
		held   atomic.Int64 // total ns spent in the simulated transaction
	)
	cpu0, redis0 := processCPU(), redisCPU(b, rdb)
	attempts.reset()
	b.ResetTimer()
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := strconv.Itoa(g)
			for next.Add(1) <= int64(b.N) {
				release, err := acquire(token)
				if err != nil {
					failed.Store(err)
					return
				}
				if inside.Add(1) != 1 {
					failed.Store(fmt.Errorf("two holders at once"))
				}
				if hold > 0 {
					t0 := time.Now()
					time.Sleep(hold)
					held.Add(int64(time.Since(t0)))
				}
				inside.Add(-1)
				if err := release(); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/n, "cpu-µs/acq")
	b.ReportMetric(float64((redisCPU(b, rdb)-redis0).Microseconds())/n, "redis-cpu-µs/acq")
	b.ReportMetric(float64(attempts.attempts.Load())/n, "tries/acq")
	if hold > 0 {
		// The lock serialises the ops, so wall time per op minus the measured
		// time in the "transaction" is what the lock itself costs per order.
		meanHold := float64(held.Load()) / n / 1e3
		b.ReportMetric(meanHold, "hold-µs")
		b.ReportMetric(float64(elapsed.Microseconds())/n-meanHold, "lock-µs/acq")
	}
	b.ReportMetric(0, "ns/op") // wall time per op is acq/s upside down; hide the duplicate
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			v, _ := strconv.ParseFloat(value, 64)
			total += v
		}
	}
	return time.Duration(total * float64(time.Second))
}

// BenchmarkIdleWaiters: 64 goroutines wait 1s for a lock that stays held.
// Reports the whole process's CPU per wall second (cpu-ms/s) and the acquire
// attempts the waiters send to Redis per second (tries/s). It measures one
// such second whatever b.N is (run it with -benchtime=1x).
func BenchmarkIdleWaiters(b *testing.B) {
	for _, mode := range []string{"wakeup", "backoff", "spin"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			rdb := newRedis(b)
			var tries attemptCounter
			c := newClient(b, rdb, &lock.ClientOptions{Observer: &tries})
			key := testKey(b, rdb)
			holder, err := c.Obtain(ctx, key, 10*time.Minute, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer holder.Release(ctx)
			const waiters, wait = 64, time.Second

			{
				var wg sync.WaitGroup
				tries.reset()
				cpu0, start := processCPU(), time.Now()
				for range waiters {
					wg.Add(1)
					go func() {
						defer wg.Done()
						waitCtx, cancel := context.WithTimeout(ctx, wait)
						defer cancel()
						if mode == "spin" {
							for waitCtx.Err() == nil {
								tries.attempts.Add(1)
								_, _ = rdb.SetNX(waitCtx, "{"+key+"}", "x", time.Minute).Result()
							}
							return
						}
						_, err := c.Obtain(waitCtx, key, time.Minute, &lock.Options{Wait: time.Minute, NoWakeup: mode == "backoff"})
						if err == nil {
							b.Error("obtained a held lock")
						}
					}()
				}
				wg.Wait()
				secs := time.Since(start).Seconds()
				b.ReportMetric(float64((processCPU()-cpu0).Milliseconds())/secs, "cpu-ms/s")
				b.ReportMetric(float64(tries.attempts.Load())/secs, "tries/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
