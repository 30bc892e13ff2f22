package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// writer reads new entries of every lua-async stream and persists them.
func (w *Writers) writer(consumer string) {
	defer w.wg.Done()
	ctx := context.Background()
	wait := newBackoff()
	idle := &idleWait{max: w.cfg.Block}
	for !w.stopped() {
		items := w.active(ctx)
		if len(items) == 0 {
			w.sleep(w.cfg.Block)
			continue
		}
		res, err := w.read(ctx, consumer, items, idle)
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case isNoGroup(err):
			w.log.Warn("lua-async writers: a consumer group is missing (Redis lost data?); creating it again", "err", err)
			w.regroup()
			continue
		case err != nil:
			if d := wait.next(); d == wait.first() || wait.every(10*time.Second) {
				w.log.Warn("lua-async writers: cannot read the streams; retrying", "err", err)
			}
			w.sleep(wait.current())
			continue
		}
		wait.reset()
		for _, st := range res {
			if len(st.msgs) > 0 {
				w.handle(consumer, st.item, st.msgs)
			}
		}
	}
}

// itemStream is what one read got from an item's stream.
type itemStream struct {
	item int64
	msgs []redis.XMessage
}

// read takes new entries of the items' streams for consumer: one blocking
// XREADGROUP over every stream, or, on a Redis Cluster with several items,
// one XREADGROUP per stream in a pipeline, without blocking (a blocking
// read of one would starve the others); when all are empty it waits a
// little, longer the longer they stay empty, up to the block time.
// redis.Nil when there was nothing.
func (w *Writers) read(ctx context.Context, consumer string, items []int64, idle *idleWait) ([]itemStream, error) {
	if !w.oneStreamPerRead || len(items) == 1 {
		streams := make([]string, 0, 2*len(items))
		byStream := make(map[string]int64, len(items))
		for _, id := range items {
			s := w.keys.Stream(id)
			streams = append(streams, s)
			byStream[s] = id
		}
		for range items {
			streams = append(streams, ">")
		}
		res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer,
			Streams: streams, Count: int64(w.cfg.Batch), Block: w.cfg.Block}).Result()
		if err != nil {
			return nil, err
		}
		out := make([]itemStream, 0, len(res))
		for _, st := range res {
			if id, ok := byStream[st.Stream]; ok {
				out = append(out, itemStream{item: id, msgs: st.Messages})
			}
		}
		return out, nil
	}
	cmds := make([]*redis.XStreamSliceCmd, len(items))
	_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range items {
			cmds[i] = p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer,
				Streams: []string{w.keys.Stream(id), ">"}, Count: int64(w.cfg.Batch), Block: -1})
		}
		return nil
	}) // each command carries its own error
	var out []itemStream
	for i, cmd := range cmds {
		res, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, st := range res {
			out = append(out, itemStream{item: items[i], msgs: st.Messages})
		}
	}
	if len(out) == 0 {
		w.sleep(idle.next())
		return nil, redis.Nil
	}
	idle.reset()
	return out, nil
}

// idleWait is how long a writer polling streams one by one waits when all
// were empty: from 5ms, doubling, up to max.
type idleWait struct{ d, max time.Duration }

func (i *idleWait) next() time.Duration {
	i.d = min(max(2*i.d, 5*time.Millisecond), i.max)
	return i.d
}

func (i *idleWait) reset() { i.d = 0 }
