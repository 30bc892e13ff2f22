package room

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A returned unit (a cancel, an expired order) resumes the line where it
// stopped, and the tickets there may belong to pages closed long ago: each
// got a pass and the unit waited one pass TTL per dead ticket before a
// live buyer had it. So the room knows which tickets were seen lately:
// callers report the tickets polled or joined (MarkSeen, batched: one call
// a tick per instance), as bits of a bitmap per SeenWindow of the callers'
// clock (ticket number = bit, about N/8 bytes a window, kept three
// windows), and Admit passes over a waiting ticket seen in neither the
// current nor the previous window: it reads expired, as if its pass had
// gone unused, which is what would have happened to it, one pass TTL
// later. Skipping starts only two windows after the first MarkSeen of the
// room (seen_since), so a room whose callers did not report yet (just set
// up, or instances of an older build) skips nobody.

// SeenWindow is the seen bitmaps' window: longer than any poll advice
// (5 s) and the slowest back-off after errors (8 s × 1.5), so a page that
// keeps polling is always seen in the current or previous window.
const SeenWindow = 30 * time.Second

// A page that stopped polling still counts as seen for up to two
// SeenWindows, and a pass handed to it lives a whole TTL: a returned unit
// still waited about a minute. So the room keeps short windows too
// (ShortSeenWindow, "…:room:seen:s:<w>", MarkSeen writes both), and Admit
// defers a ticket seen in the long windows but in neither of the last two
// short ones (admit.lua): it waits aside (the deferred set, it reads
// waiting at position 1) and the next ticket is considered; it is admitted
// first once it is seen in a short window again, and passed over once it
// is seen in neither long window. And an admitted ticket whose pass its
// page has not read (a status poll) within ClaimWindow loses it: the pass
// lapses and the ticket is deferred (Admission.Unclaimed), so a page that
// closed holds a returned unit for seconds, not a whole TTL. Deferring
// starts only two short windows after the first MarkSeen that wrote them
// (seen_short_since): instances of an older build write only the long ones.

// ShortSeenWindow is the short seen bitmaps' window: longer than the poll
// advice of a ticket near the head of the line (1 s), so a page about to
// be admitted is seen in the current or the previous short window.
const ShortSeenWindow = 3 * time.Second

// DefaultClaimWindow is how long an admitted ticket's pass waits to be
// read by its page before it lapses (Options.ClaimWindow).
const DefaultClaimWindow = 3 * time.Second

// maxSkipPerCall bounds the unseen tickets one Admit call passes over.
const maxSkipPerCall = 20_000

func seenWindow(now time.Time) int64 { return now.UnixMilli() / SeenWindow.Milliseconds() }

func (k keys) seen(w int64) string { return fmt.Sprintf("%s:seen:%d", k.meta, w) }

func shortSeenWindow(now time.Time) int64 { return now.UnixMilli() / ShortSeenWindow.Milliseconds() }

func (k keys) seenShort(w int64) string { return fmt.Sprintf("%s:seen:s:%d", k.meta, w) }

var markSeenScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'seen_since', ARGV[1])
redis.call('HSETNX', KEYS[1], 'seen_short_since', ARGV[1])
for i = 4, #ARGV do
  redis.call('SETBIT', KEYS[2], ARGV[i], 1)
  redis.call('SETBIT', KEYS[3], ARGV[i], 1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1`)

// MarkSeen records that tickets were polled or joined at now (the
// callers' clock, as Admit's), in the long and the short windows.
func (r *Room) MarkSeen(ctx context.Context, now time.Time, tickets []int64) error {
	if len(tickets) == 0 {
		return nil
	}
	args := make([]any, 0, len(tickets)+3)
	args = append(args, now.UnixMilli(), 3*SeenWindow.Milliseconds(), 3*ShortSeenWindow.Milliseconds())
	for _, t := range tickets {
		args = append(args, t)
	}
	n, err := markSeenScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.seen(seenWindow(now)), r.k.seenShort(shortSeenWindow(now))}, args...).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return ErrNoRoom
	}
	return nil
}
