package app

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/shop"
)

// readinessCheck is what /readyz asks of the service.
type readinessCheck interface {
	Ready(ctx context.Context) error
	Backlog(ctx context.Context) (stock.AsyncStats, error)
}

// readinessCache bounds what the public /readyz costs: a check (a Redis
// PING, a database ping, and a Redis pipeline and a query per lua-async
// item) runs at most once per ttl (SECKILL_READYZ_TTL, a second by default:
// a load balancer polls every few seconds), whatever the number of callers; callers
// meanwhile share the running check (singleflight) or the last result.
// A check runs on its own context, bounded by timeout, so a caller that
// gives up does not fail it for the others.
type readinessCache struct {
	check   readinessCheck
	ttl     time.Duration
	timeout time.Duration
	group   singleflight.Group

	mu   sync.Mutex
	last *readiness // nil: none yet
}

// readiness is the outcome of one check.
type readiness struct {
	at         time.Time
	ready      error
	backlog    stock.AsyncStats
	backlogErr error
}

func newReadinessCache(check readinessCheck, ttl, timeout time.Duration) *readinessCache {
	return &readinessCache{check: check, ttl: ttl, timeout: timeout}
}

// Ready is the readiness as last checked, within ttl.
func (c *readinessCache) Ready(ctx context.Context) error {
	r, err := c.get(ctx)
	if err != nil {
		return err
	}
	return r.ready
}

// Backlog is the lua-async backlog as last checked, within ttl.
func (c *readinessCache) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	r, err := c.get(ctx)
	if err != nil {
		return stock.AsyncStats{}, err
	}
	return r.backlog, r.backlogErr
}

func (c *readinessCache) get(ctx context.Context) (*readiness, error) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && time.Since(last.at) < c.ttl {
		return last, nil
	}
	ch := c.group.DoChan("ready", func() (any, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		r := &readiness{ready: c.check.Ready(cctx)}
		if r.ready == nil {
			r.backlog, r.backlogErr = c.check.Backlog(cctx)
		}
		r.at = time.Now()
		c.mu.Lock()
		c.last = r
		c.mu.Unlock()
		return r, nil
	})
	select {
	case res := <-ch:
		return res.Val.(*readiness), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readyShop is the service with /readyz's checks cached.
type readyShop struct {
	*shop.Service
	ready *readinessCache
}

func (s readyShop) Ready(ctx context.Context) error { return s.ready.Ready(ctx) }
func (s readyShop) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	return s.ready.Backlog(ctx)
}
