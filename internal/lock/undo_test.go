package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// An acquire call that timed out (the script may have run) is undone by a
// release sent after it, but Obtain does not wait for that release:
// its caller hears ErrNotObtained while the release is still on its way
// (with Redis stalled, waiting would cost every lock order the Redis
// timeout twice). Close waits for the release. No clock: the hook fails the
// acquire call and holds the release until the test lets it go.
func TestObtainDoesNotWaitForItsUndo(t *testing.T) {
	rdb := newRedis(t)
	h := &undoHook{let: make(chan struct{}), releasing: make(chan struct{})}
	rdb.AddHook(h)
	c := lock.New(rdb, nil)
	key := testKey(t, rdb)
	done := make(chan error, 1)
	go func() {
		_, err := c.Obtain(context.Background(), key, time.Second, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain with its acquire call unanswered: %v, want ErrNotObtained", err)
		}
	case <-time.After(30 * time.Second): // a safety net: the release is held for ever
		t.Fatal("Obtain still waits for the undo of its acquire call after 30 s")
	}
	close(h.let)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.releasing:
	default:
		t.Fatal("no release was sent for the unanswered acquire call")
	}
	if !h.released.Load() {
		t.Error("Close returned before the release ran")
	}
}

// undoHook fails the first script call (the acquire) as a read timeout
// would, and holds the second (the release) until let is closed.
type undoHook struct {
	calls     atomic.Int32
	let       chan struct{}
	releasing chan struct{}
	released  atomic.Bool
}

func (h *undoHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *undoHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *undoHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		switch h.calls.Add(1) {
		case 1:
			err := fmt.Errorf("undo test: no answer: %w", os.ErrDeadlineExceeded)
			cmd.SetErr(err)
			return err
		case 2:
			close(h.releasing)
			<-h.let
			err := next(ctx, cmd)
			h.released.Store(true)
			return err
		}
		return next(ctx, cmd)
	}
}

// ClientOptions.CallTimeout bounds an acquire call that gets no answer:
// Obtain fails with ErrNotObtained instead of waiting for the client's
// timeouts and retries. The hook answers the acquire call only when its
// context ends (as a client that honours deadlines does with a stalled
// Redis): without the bound nothing would end it.
func TestObtainCallTimeout(t *testing.T) {
	rdb := newRedis(t)
	rdb.AddHook(stallHook{})
	c := lock.New(rdb, &lock.ClientOptions{CallTimeout: 50 * time.Millisecond})
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Obtain(context.Background(), testKey(t, rdb), time.Second, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain, its acquire call unanswered: %v, want ErrNotObtained", err)
		}
	case <-time.After(30 * time.Second): // a safety net: the hook never answers by itself
		t.Fatal("Obtain still waits for an unanswered acquire call after 30 s")
	}
}

// stallHook holds every script call until its context ends.
type stallHook struct{}

func (stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		<-ctx.Done()
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
}
