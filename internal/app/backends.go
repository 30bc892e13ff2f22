package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/stock/gate"
)

// openRedis connects to RedisURL (a Redis Cluster when mode is
// RedisModeCluster), or starts an embedded miniredis when it is empty.
// Timeouts are short so an outage answers 503 within about a second.
func openRedis(ctx context.Context, mode, url string, timeout time.Duration, log *slog.Logger) (redis.UniversalClient, *embedredis.Server, string, error) {
	if mode == RedisModeCluster {
		return openCluster(ctx, url, timeout, log)
	}
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
		if strings.Contains(url, "addr=") {
			err = fmt.Errorf("%w (a cluster URL with addr= needs SECKILL_REDIS_MODE=cluster)", err)
		}
		return nil, nil, "", fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	if timeout == 0 {
		timeout = DefaultRedisTimeout
		if embedded != nil {
			timeout = DefaultEmbeddedRedisTimeout
		}
	}
	p := clientSettings(timeout)
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = p.dial, p.read, p.write, p.pool
	opt.MaxRetries, opt.Protocol, opt.PoolSize, opt.MinIdleConns = p.maxRetries, p.protocol, p.poolSize, p.minIdle
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
		if err := checkSingle(pctx, rdb, log); err != nil {
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

// redisTimeout is the bound on each Redis call: SECKILL_REDIS_TIMEOUT or
// its default.
func (a *App) redisTimeout() time.Duration {
	switch {
	case a.cfg.RedisTimeout > 0:
		return a.cfg.RedisTimeout
	case a.miniRDB != nil:
		return DefaultEmbeddedRedisTimeout
	}
	return DefaultRedisTimeout
}

// clientParams are the connection settings of both modes (per node on a
// Cluster).
type clientParams struct {
	dial, read, write, pool time.Duration
	maxRetries, protocol    int
	poolSize, minIdle       int
}

func clientSettings(timeout time.Duration) clientParams {
	return clientParams{dial: timeout, read: timeout, write: timeout, pool: 2 * timeout,
		maxRetries: 1, // the gate scripts are safe to rerun
		// RESP2: the service uses no RESP3 feature, and with RESP3 go-redis
		// peeks for push notifications before every command (measured: about
		// 10% more orders a second without it).
		protocol: 2,
		poolSize: 128, minIdle: 8}
}

// openCluster connects to the Redis Cluster that url names (go-redis's
// cluster URL: redis://host1:port1?addr=host2:port2), with the settings of
// a single Redis applied to each node, and checks every master.
func openCluster(ctx context.Context, url string, timeout time.Duration, log *slog.Logger) (redis.UniversalClient, *embedredis.Server, string, error) {
	if url == "" {
		return nil, nil, "", errors.New("SECKILL_REDIS_MODE=cluster needs SECKILL_REDIS_URL")
	}
	if err := checkClusterURL(url); err != nil {
		return nil, nil, "", err
	}
	opt, _ := redis.ParseClusterURL(url) // checked above
	if timeout == 0 {
		timeout = DefaultRedisTimeout
	}
	p := clientSettings(timeout)
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = p.dial, p.read, p.write, p.pool
	opt.MaxRetries, opt.Protocol, opt.PoolSize, opt.MinIdleConns = p.maxRetries, p.protocol, p.poolSize, p.minIdle
	// A master that died refuses connections at once, but go-redis dials
	// it 5 times, 100 ms apart, for each of the up to 4 attempts of a
	// command (MaxRedirects 3): about 2 s before its items hear 503, and
	// every shared pipeline waits as long (measured: 4 s with the
	// failover). One dial an attempt fails a dead master's command in
	// milliseconds; the next attempt dials again, and the slot map reload
	// moves it to the promoted replica.
	opt.DialerRetries = clusterDialAttempts
	// Between those attempts go-redis sleeps a random 10 ms up to 10 ms
	// doubled each time (at most 1 s): capped so a dead master's command
	// gives up within about 100 ms in all.
	opt.MaxRetryBackoff = clusterMaxRetryBackoff
	// go-redis learns a new slot map from MOVED or from this periodic
	// reload (default a minute), not from a dead master's refused
	// connections: after a failover the items of that master would answer
	// 503 until the next reload. One CLUSTER SLOTS a second is cheap.
	opt.ClusterStateReloadInterval = clusterStateReload
	rdb := redis.NewClusterClient(opt)
	seeds := strings.Join(opt.Addrs, ",")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A seed that is no Cluster node answers "cluster support disabled".
	info, err := rdb.ClusterInfo(pctx).Result()
	if err != nil {
		_ = rdb.Close()
		if strings.Contains(err.Error(), "cluster support disabled") {
			return nil, nil, "", fmt.Errorf("redis at %s is not a Redis Cluster node (cluster support disabled): "+
				"use SECKILL_REDIS_MODE=single for a single Redis", seeds)
		}
		return nil, nil, "", fmt.Errorf("redis cluster at %s does not answer: %w", seeds, err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		_ = rdb.Close()
		return nil, nil, "", fmt.Errorf("redis cluster at %s is not ready (cluster_state is not ok): some slots have no master", seeds)
	}
	var masters []string
	var mu sync.Mutex
	err = gate.EachMaster(pctx, rdb, func(ctx context.Context, addr string, c redis.Cmdable) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s does not answer: %w", addr, err)
		}
		if err := checkEviction(ctx, c, log.With("master", addr)); err != nil {
			return fmt.Errorf("master %s: %w", addr, err)
		}
		checkCoverage(ctx, c, log.With("master", addr))
		mu.Lock()
		masters = append(masters, addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, "", fmt.Errorf("redis cluster at %s: %w", seeds, err)
	}
	sort.Strings(masters)
	return rdb, nil, fmt.Sprintf("redis cluster, %d masters: %s", len(masters), strings.Join(masters, ",")), nil
}

// clusterDialAttempts is how many times a cluster node's connection is
// dialled before the attempt fails (go-redis's DialerRetries; its default
// is 5, 100 ms apart).
const clusterDialAttempts = 1

// clusterMaxRetryBackoff caps go-redis's sleep between the attempts of a
// cluster command (its default is 1 s).
const clusterMaxRetryBackoff = 32 * time.Millisecond

// checkCoverage warns about a master with cluster-require-full-coverage
// yes, Redis's default. With it, once a master is marked failed (after
// cluster-node-timeout) every master refuses every slot (CLUSTERDOWN)
// until its replica is promoted, or for good if it has none: a failed
// master stops the sale of every item, not just of its own. The service
// needs no full coverage: an item's keys all live in its own slot (a
// bucketed item's in each bucket's), and a lost slot's items answer 503 on
// their own. It warns rather than refuses: availability, not safety, is at
// stake, and a managed Redis may not let it be changed (or read: a Redis
// that refuses CONFIG is not warned about).
func checkCoverage(ctx context.Context, c redis.Cmdable, log *slog.Logger) {
	res, err := c.ConfigGet(ctx, "cluster-require-full-coverage").Result()
	if err != nil || res["cluster-require-full-coverage"] != "yes" {
		return
	}
	log.WarnContext(ctx, "redis cluster-require-full-coverage is yes: while one master is down, every master refuses "+
		"every slot (CLUSTERDOWN) until its replica takes over, so items on healthy masters answer 503 too; "+
		"set cluster-require-full-coverage no on every node (docs/OPERATIONS.md)")
}

// clusterStateReload is how often a Redis Cluster client reloads the slot
// map while it sends commands (see openCluster).
const clusterStateReload = time.Second

// checkClusterURL parses a cluster URL as openCluster will.
func checkClusterURL(url string) error {
	if !strings.HasPrefix(url, "redis://") && !strings.HasPrefix(url, "rediss://") {
		return fmt.Errorf("SECKILL_REDIS_URL=%q: want redis://host1:port1?addr=host2:port2&addr=host3:port3 with SECKILL_REDIS_MODE=cluster", url)
	}
	if _, err := redis.ParseClusterURL(url); err != nil {
		return fmt.Errorf("SECKILL_REDIS_URL: %w (want redis://host1:port1?addr=host2:port2&addr=host3:port3 with SECKILL_REDIS_MODE=cluster)", err)
	}
	if u, err := neturl.Parse(url); err == nil && u.Path != "" && u.Path != "/" && u.Path != "/0" {
		return fmt.Errorf("SECKILL_REDIS_URL=%q: a Redis Cluster has database 0 only; drop %q", url, u.Path)
	}
	return nil
}

// checkSingle checks a single Redis: it must not evict (checkEviction), and
// must not be a Cluster node, whose other slots would answer MOVED (503s)
// for most items.
func checkSingle(ctx context.Context, rdb *redis.Client, log *slog.Logger) error {
	if info, err := rdb.Info(ctx, "cluster").Result(); err == nil && strings.Contains(info, "cluster_enabled:1") {
		return errors.New("it is a Redis Cluster node: set SECKILL_REDIS_MODE=cluster and list the cluster's nodes in SECKILL_REDIS_URL " +
			"(redis://host1:port1?addr=host2:port2)")
	}
	return checkEviction(ctx, rdb, log)
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
//
// On a Redis Cluster each master is checked (see openCluster).
func checkEviction(ctx context.Context, rdb redis.Cmdable, log *slog.Logger) error {
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
