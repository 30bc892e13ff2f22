package gate

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// When a node counts as silent. A node that answers, however slowly (an
// overloaded Redis), keeps its calls queued; one that answers nothing
// past Options.Wait (a stall: connections open, no bytes) fails them,
// so a stalled Redis gets its 503 within about Wait, not Wait for each
// call queued behind another.

// down reports whether ln's node failed or is silent just now: then, on a
// Redis Cluster, its calls fail at once instead of each waiting Wait. On
// one Redis a call is never refused at once (there are no other nodes'
// calls to keep apart, and a Redis that is back must answer at once): a
// queued call of a silent node fails at its deadline instead (see left).
func (b *Pipeline) down(ln *lane) bool {
	if b.cluster == nil {
		return false
	}
	now := time.Now().UnixNano()
	return now < ln.downUntil.Load() || b.silent(ln, now, false)
}

// silent reports whether ln's node stopped answering: a pipeline of its
// lane has been in flight longer than Options.Wait, and no pipeline of the
// lane got its answer within Wait. A node that keeps answering, even
// slowly (an overloaded Redis), is not silent, and its queued calls keep
// their place; a stalled one (connections open, no bytes) is. With sticky,
// a pipeline that failed without an answer since the last answer counts
// too: the node stays silent for its queued calls between the stalled
// pipelines' end and the next ones passing Wait. Not for refusing calls
// at once: a lane that sends nothing would never hear an answer again.
func (b *Pipeline) silent(ln *lane, now int64, sticky bool) bool {
	answered := ln.answered.Load()
	if b.wait <= 0 || now-answered <= int64(b.wait) {
		return false
	}
	if sticky && ln.failed.Load() > answered {
		return true
	}
	for i := range ln.sent {
		if t := ln.sent[i].Load(); t != 0 && now-t > int64(b.wait) {
			return true
		}
	}
	return false
}

// laneRest is how long a lane whose node did not answer refuses its calls
// at once. Short: the slot map reload it triggers moves the lane's slots
// to a promoted replica's lane within moments, and a node that is back is
// found again by the first batch after it.
const laneRest = 100 * time.Millisecond

// left is how much longer c may wait: Wait from its sending; while it is
// queued, nothing once its node is silent, else until a pipeline in flight
// would pass Wait (when the node may turn out silent), Wait at most.
func (b *Pipeline) left(ln *lane, c *call) time.Duration {
	if sent := c.sent.Load(); sent != 0 {
		return time.Until(time.Unix(0, sent).Add(b.wait))
	}
	now := time.Now().UnixNano()
	if b.silent(ln, now, true) || now < ln.downUntil.Load() {
		return 0
	}
	next := b.wait
	for i := range ln.sent {
		if t := ln.sent[i].Load(); t != 0 {
			next = min(next, time.Duration(t+int64(b.wait)-now))
		}
	}
	// A pipeline just past Wait, with an answer of the node since: look
	// again a little later rather than spin.
	return max(next, b.wait/16, time.Millisecond)
}

func (b *Pipeline) noAnswer(ln *lane) error {
	node := "redis"
	if ln.addr != "" {
		node = "redis node " + ln.addr
	}
	return fmt.Errorf("%s: no answer within %s: %w", node, b.wait, stock.ErrUnavailable)
}
