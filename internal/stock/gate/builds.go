package gate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/stock"
)

// RebuildTimeout bounds one rebuild of a gate from the database, detached
// from the request that started it (see Builds).
const RebuildTimeout = 2 * time.Minute

// Builds runs one gate rebuild per item at a time in this process. A
// rebuild runs apart from the request that needs it (with RebuildTimeout),
// so a large one is not cut short by the first caller's deadline and
// started over by the next; each caller waits for it until its own
// context ends, and then gets stock.ErrUnavailable (503) while the rebuild
// goes on. The zero value is ready; Close stops the rebuilds under way and
// waits for them.
type Builds struct {
	group singleflight.Group
	wg    sync.WaitGroup
	once  sync.Once
	stop  context.Context
	halt  context.CancelFunc
}

func (b *Builds) init() {
	b.once.Do(func() { b.stop, b.halt = context.WithCancel(context.Background()) })
}

// Do runs build for item id, unless a rebuild of it is under way here
// already, and waits for that one.
func (b *Builds) Do(ctx context.Context, id int64, build func(ctx context.Context) error) error {
	b.init()
	done := make(chan error, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_, err, _ := b.group.Do(strconv.FormatInt(id, 10), func() (any, error) {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RebuildTimeout)
			defer cancel()
			defer context.AfterFunc(b.stop, cancel)()
			return nil, build(bctx)
		})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("item %d: its gate is being rebuilt from the database; try again: %w: %w", id, stock.ErrUnavailable, ctx.Err())
	}
}

// Close stops the rebuilds under way and waits for them.
func (b *Builds) Close() {
	b.init()
	b.halt()
	b.wg.Wait()
}
