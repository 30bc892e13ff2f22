package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
)

// A writer reads every lua-async stream and persists what it gets. Each
// stream's read stands on its own: on a Redis Cluster every stream has a
// slot, and maybe a master, of its own, so one stream failing (its master
// down, its group gone with its master's data) must neither drop what the
// others delivered in the same round nor hold them back. A stream whose
// read failed is left out for a while (backing off, that stream only); one
// whose group is missing gets it again. A stream may also owe entries:
// delivered to this writer and not settled (a read whose reply was lost,
// an acknowledgement that failed); its next read asks for this writer's
// own pending entries ("0" instead of ">") until none is left; while
// they cannot be settled (its acknowledgements fail), at most once per
// backoff, its new entries being read and written meanwhile. Writing is
// idempotent, so an entry read twice is found done.

// streamState is what one writer knows about one stream: an item's, or
// one bucket's of an item with several (each has a stream of its own).
type streamState struct {
	wait    backoff
	retryAt time.Time // a failed read: none before
	owed    bool      // read this writer's pending entries first
	owedAt  time.Time // ... once due: not before
	owedFor backoff   // the owed entries keep failing to settle
}

// history reports whether the stream's next read is of this writer's
// pending entries.
func (s *streamState) history(now time.Time) bool { return s.owed && !now.Before(s.owedAt) }

// unsettled notes entries left pending: they are read again after a
// backoff.
func (s *streamState) unsettled() {
	s.owed = true
	s.owedAt = time.Now().Add(s.owedFor.next())
}

// reader is one writer's view of the streams.
type reader struct {
	consumer string
	idle     idleWait
	streams  map[gate.Bucket]*streamState
}

// streamRetryMax caps a failing stream's backoff: a master back (or a
// replica promoted) is read again within a second.
const streamRetryMax = time.Second

func (r *reader) stream(bk gate.Bucket) *streamState {
	s, ok := r.streams[bk]
	if !ok {
		s = &streamState{wait: backoff{max: streamRetryMax}, owedFor: backoff{max: streamRetryMax}}
		r.streams[bk] = s
	}
	return s
}

// due lists the streams that may be read now; when none, how long until
// one may.
func (r *reader) due(items []gate.Bucket) ([]gate.Bucket, time.Duration) {
	now := time.Now()
	out := make([]gate.Bucket, 0, len(items))
	var wake time.Duration
	for _, id := range items {
		at := r.stream(id).retryAt
		if !now.Before(at) {
			out = append(out, id)
		} else if d := at.Sub(now); wake == 0 || d < wake {
			wake = d
		}
	}
	return out, wake
}

// writer reads new entries of every lua-async stream and persists them.
func (w *Writers) writer(consumer string) {
	defer w.wg.Done()
	ctx := context.Background()
	r := &reader{consumer: consumer, idle: idleWait{max: w.cfg.Block}, streams: map[gate.Bucket]*streamState{}}
	for !w.stopped() {
		items, wake := r.due(w.active(ctx))
		if len(items) == 0 {
			if wake == 0 {
				wake = w.cfg.Block
			}
			w.sleep(wake)
			continue
		}
		got := 0
		reads := w.read(ctx, r, items)
		settled := w.handleAll(r.consumer, reads)
		for i, res := range reads {
			got += len(res.msgs)
			w.took(r, res, settled[i])
		}
		if w.polls(items) {
			if got > 0 {
				r.idle.reset()
			} else {
				w.sleep(r.idle.next())
			}
		}
	}
}

// handleAll persists what each stream's read gave, the streams' batches
// concurrently (at most maxParallelBatches at once): the K batches of one
// item with K bucket rows commit on K rows in parallel, each acknowledged
// in its own slot. settled[i] says whether reads[i]'s entries were all
// settled (see handle); it is true for a read that gave none.
func (w *Writers) handleAll(consumer string, reads []streamRead) []bool {
	settled := make([]bool, len(reads))
	var todo []int
	for i, res := range reads {
		settled[i] = true
		if (res.err == nil || errors.Is(res.err, redis.Nil)) && len(res.msgs) > 0 {
			todo = append(todo, i)
		}
	}
	if len(todo) == 1 {
		i := todo[0]
		settled[i] = w.handle(consumer, reads[i].stream, reads[i].msgs)
		return settled
	}
	sem := make(chan struct{}, maxParallelBatches)
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			settled[i] = w.handle(consumer, reads[i].stream, reads[i].msgs)
		}(i)
	}
	wg.Wait()
	return settled
}

// maxParallelBatches bounds the batches one writer has in flight at once
// (one per stream that delivered in a round).
const maxParallelBatches = 8

// took updates the stream's state after its read and, if it gave entries,
// their handling (settled).
func (w *Writers) took(r *reader, res streamRead, settled bool) {
	st := r.stream(res.stream)
	switch {
	case res.err == nil || errors.Is(res.err, redis.Nil):
		st.wait.reset()
		st.retryAt = time.Time{}
		if len(res.msgs) == 0 {
			if res.history {
				st.owed = false
				st.owedFor.reset()
			}
			return
		}
		if !settled {
			st.unsettled()
		} else if res.history {
			// Read it again at once: there may be more than a batch,
			// and none is left only when it comes back empty.
			st.owedAt = time.Time{}
		}
	case isNoGroup(res.err):
		// Its pending entries went with the group: none is owed.
		w.log.Warn("lua-async writers: a consumer group is missing (Redis lost data?); creating it again",
			"item", res.stream.Item, "bucket", res.stream.B, "err", res.err)
		w.regroup(res.stream)
		st.owed = false
	default:
		// The read may have run and its reply been lost: what it
		// delivered is pending to this writer.
		st.owed = true
		d := st.wait.next()
		st.retryAt = time.Now().Add(d)
		if d == st.wait.first() || st.wait.every(10*time.Second) {
			w.log.Warn("lua-async writers: cannot read a stream; retrying it", "item", res.stream.Item, "bucket", res.stream.B, "in", d, "err", res.err)
		}
	}
}

// streamRead is what one read got from a stream.
type streamRead struct {
	stream  gate.Bucket
	msgs    []redis.XMessage
	err     error
	history bool // this writer's own pending entries, not new ones
}

// polls reports whether items are read one XREADGROUP each, without
// blocking: on a Redis Cluster with several items (a blocking read of one
// would starve the others).
func (w *Writers) polls(items []gate.Bucket) bool { return w.oneStreamPerRead && len(items) > 1 }

// read takes entries of the items' streams for r's consumer: new ones, or
// its own pending ones where a stream owes some. One blocking XREADGROUP
// over every stream, or, when it polls, one XREADGROUP per stream in a
// pipeline, each with its own result.
func (w *Writers) read(ctx context.Context, r *reader, items []gate.Bucket) []streamRead {
	now := time.Now()
	out := make([]streamRead, len(items))
	ids := make([]string, len(items)) // where each stream is read from
	for i, id := range items {
		out[i] = streamRead{stream: id, history: r.stream(id).history(now)}
		ids[i] = ">"
		if out[i].history {
			ids[i] = "0"
		}
	}
	if !w.polls(items) {
		streams := make([]string, 0, 2*len(items))
		for _, id := range items {
			streams = append(streams, w.streamKey(id))
		}
		streams = append(streams, ids...)
		res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: r.consumer,
			Streams: streams, Count: int64(w.cfg.Batch), Block: w.cfg.Block}).Result()
		got := make(map[string][]redis.XMessage, len(res))
		for _, st := range res {
			got[st.Stream] = st.Messages
		}
		// One command: its error is every stream's.
		for i, id := range items {
			out[i].msgs, out[i].err = got[w.streamKey(id)], err
		}
		return out
	}
	cmds := make([]*redis.XStreamSliceCmd, len(items))
	_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range items {
			cmds[i] = p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: r.consumer,
				Streams: []string{w.streamKey(id), ids[i]}, Count: int64(w.cfg.Batch), Block: -1})
		}
		return nil
	}) // each command carries its own error
	for i, cmd := range cmds {
		res, err := cmd.Result()
		out[i].err = err
		for _, st := range res {
			out[i].msgs = append(out[i].msgs, st.Messages...)
		}
	}
	return out
}

// idleWait is how long a writer polling streams one by one waits when all
// were empty: from 5ms, doubling, up to max.
type idleWait struct{ d, max time.Duration }

func (i *idleWait) next() time.Duration {
	i.d = min(max(2*i.d, 5*time.Millisecond), i.max)
	return i.d
}

func (i *idleWait) reset() { i.d = 0 }
