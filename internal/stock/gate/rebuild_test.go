package gate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// The planned taken units sum to sold plus what is in flight, and no
// bucket's taken is below what it holds in flight (the install takes one
// off for each reservation handed back meanwhile, and must not go below
// zero), whatever the spread.
func TestPlannedTaken(t *testing.T) {
	for _, c := range []struct {
		stock, sold int64
		inFlight    []int64
	}{
		{9, 8, []int64{0}},
		{9, 2, []int64{3}},
		{10, 0, []int64{0, 0, 0}},
		{10, 3, []int64{4, 0, 0}},
		{10, 0, []int64{0, 0, 7}},
		{7, 2, []int64{1, 5, 0}}, // more in flight than the stock left
		{3, 0, []int64{0, 0, 0, 0, 0, 0, 0, 0}},
		{1000, 17, []int64{3, 1, 0, 9}},
	} {
		taken := plannedTaken(c.stock, c.sold, c.inFlight)
		sum, want := int64(0), c.sold
		for b, n := range c.inFlight {
			want += n
			sum += taken[b]
			if taken[b] < n {
				t.Errorf("%+v: bucket %d taken %d, below its %d in flight", c, b, taken[b], n)
			}
		}
		for b, n := range c.inFlight {
			if free := share(c.stock, len(c.inFlight), b) - taken[b]; free < 0 && n == 0 && want <= c.stock {
				t.Errorf("%+v: bucket %d, holding nothing in flight, has %d free units", c, b, free)
			}
		}
		if sum != want {
			t.Errorf("%+v: taken %v sums to %d, want %d", c, taken, sum, want)
		}
	}
}

// A caller whose context ends while the rebuild it waits for runs on hears
// stock.ErrUnavailable at once; a caller that comes meanwhile joins that
// rebuild rather than starting another, and the rebuild is not cut short
// by the callers' deadlines.
func TestBuildsWaitUntilCallerDeadline(t *testing.T) {
	var b Builds
	defer b.Close()
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	finished := make(chan error, 2)
	var runs atomic.Int32
	build := func(ctx context.Context) error {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		finished <- ctx.Err()
		return ctx.Err()
	}
	caller := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return b.Do(ctx, 1, build)
	}
	if err := caller(); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("first caller, whose deadline came first: got %v, want ErrUnavailable", err)
	}
	<-started
	if err := caller(); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("second caller, while the rebuild runs: got %v, want ErrUnavailable", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("rebuilds run while one was under way: %d, want 1", n)
	}
	close(release)
	if err := <-finished; err != nil {
		t.Errorf("the rebuild ended with %v, want it run to its end", err)
	}
	if err := b.Do(context.Background(), 1, build); err != nil {
		t.Errorf("a caller after it: got %v, want nil", err)
	}
}
