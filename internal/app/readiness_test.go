package app

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// countingCheck counts the checks run through it; each takes delay.
type countingCheck struct {
	ready, backlog atomic.Int64
	delay          time.Duration
	err            error
}

func (c *countingCheck) Ready(ctx context.Context) error {
	c.ready.Add(1)
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.err
}

func (c *countingCheck) Backlog(context.Context) (stock.AsyncStats, error) {
	c.backlog.Add(1)
	return stock.AsyncStats{Queued: 7}, nil
}

// N concurrent callers, and any number of callers within the TTL, cost one
// check; a caller that gives up does not fail it for the others; after the
// TTL the next caller checks again, and a failure is cached like success.
func TestReadinessCacheRunsOneCheckPerTTL(t *testing.T) {
	t.Parallel()
	check := &countingCheck{delay: 50 * time.Millisecond}
	c := newReadinessCache(check, time.Hour, time.Second)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Ready(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller whose context has ended: got %v, want context.Canceled", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if err := c.Ready(ctx); err != nil {
				t.Errorf("ready: %v", err)
			}
			if q, err := c.Backlog(ctx); err != nil || q.Queued != 7 {
				t.Errorf("backlog: got %+v %v, want 7 queued", q, err)
			}
		}()
	}
	wg.Wait()
	if r, b := check.ready.Load(), check.backlog.Load(); r != 1 || b != 1 {
		t.Errorf("200 concurrent callers (and one that gave up): got %d readiness and %d backlog checks, want 1 and 1", r, b)
	}

	// Past the TTL: one more check, whose failure is then served as is.
	c.ttl = 0
	check.err = errors.New("redis down")
	if err := c.Ready(context.Background()); err == nil {
		t.Error("after the TTL with the check failing: got ready, want the failure")
	}
	c.ttl = time.Hour
	check.err = nil
	for i := 0; i < 10; i++ {
		if err := c.Ready(context.Background()); err == nil {
			t.Fatal("a cached failure turned into success without a check")
		}
	}
	if r, b := check.ready.Load(), check.backlog.Load(); r != 2 || b != 1 {
		t.Errorf("after the TTL: got %d readiness and %d backlog checks, want 2 and 1", r, b)
	}
}
