package app

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
)

// openRedis connects to RedisURL, or starts an embedded miniredis when it is
// empty. Timeouts are short so an outage answers 503 within about a second.
func openRedis(ctx context.Context, url string, timeout time.Duration) (redis.UniversalClient, *embedredis.Server, string, error) {
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
		timeout = time.Second
		if embedded != nil {
			timeout = 10 * time.Second
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
	desc := "redis " + opt.Addr
	if embedded != nil {
		desc = "embedded redis (miniredis) at " + opt.Addr
	}
	return rdb, embedded, desc, nil
}
