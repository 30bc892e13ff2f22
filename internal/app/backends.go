package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
)

// openRedis connects to RedisURL, or starts an embedded miniredis when it is
// empty. Timeouts are short so an outage answers 503 within about a second.
func openRedis(ctx context.Context, url string, timeout time.Duration, log *slog.Logger) (redis.UniversalClient, *embedredis.Server, string, error) {
	var embedded *embedredis.Server
	if url == "" {
		var err error
		if embedded, err = embedredis.Start(); err != nil {
			return nil, nil, "", fmt.Errorf("start embedded redis: %w", err)
		}
		url = embedded.URL()
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, "", fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	if timeout == 0 {
		timeout = DefaultRedisTimeout
		if embedded != nil {
			timeout = DefaultEmbeddedRedisTimeout
		}
	}
	opt.DialTimeout = timeout
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.PoolTimeout = 2 * timeout
	opt.MaxRetries = 1 // the gate scripts are safe to rerun
	// RESP2: the service uses no RESP3 feature, and with RESP3 go-redis
	// peeks for push notifications before every command (measured: about
	// 10% more orders a second without it).
	opt.Protocol = 2
	opt.PoolSize = 128
	opt.MinIdleConns = 8
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		if embedded != nil {
			embedded.Close()
		}
		return nil, nil, "", fmt.Errorf("redis at %s does not answer: %w", opt.Addr, err)
	}
	if embedded == nil {
		if err := checkEviction(pctx, rdb, log); err != nil {
			_ = rdb.Close()
			return nil, nil, "", fmt.Errorf("redis at %s: %w", opt.Addr, err)
		}
	}
	desc := "redis " + opt.Addr
	if embedded != nil {
		desc = "embedded redis (miniredis) at " + opt.Addr
	}
	return rdb, embedded, desc, nil
}

// checkEviction refuses a Redis that may evict any key when its memory is
// full (maxmemory-policy allkeys-*): it could drop a lua-async stream, or a
// gate's buyers, while the rest survives, and queued 202s would be lost
// without a trace. It is refused even without a memory limit yet, since
// one can be set at run time. volatile-* evicts only keys with a TTL
// (pending markers, idempotency keys, locks, rate-limit buckets): answers
// degrade (a pending order not found by id, a replay answered as
// already_purchased), nothing is lost, so it only warns. A Redis that
// refuses CONFIG (managed services often do) gets a warning too.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	res, err := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	policy := res["maxmemory-policy"]
	if err != nil || policy == "" {
		log.WarnContext(ctx, "redis maxmemory-policy could not be read; it must be noeviction (or volatile-*): "+
			"a Redis that evicts any key can lose queued lua-async orders", "err", err)
		return nil
	}
	switch {
	case strings.HasPrefix(policy, "allkeys-"):
		return fmt.Errorf("maxmemory-policy is %s: a full Redis would evict any key, a lua-async order stream or a gate "+
			"included, and lose admitted orders silently; set maxmemory-policy noeviction (full memory then answers 503)", policy)
	case strings.HasPrefix(policy, "volatile-"):
		log.WarnContext(ctx, "redis maxmemory-policy "+policy+" evicts keys with a TTL when memory is full: pending-order markers, "+
			"idempotency keys and locks may go (answers degrade, nothing is lost); noeviction is safer", "policy", policy)
	}
	return nil
}
