package queue

import (
	"cmp"
	"time"
)

// backoff doubles from 50ms to max (0: 5s).
type backoff struct {
	n    int
	d    time.Duration
	max  time.Duration
	last time.Time // last time every() said yes
}

func newBackoff() *backoff              { return &backoff{} }
func (b *backoff) first() time.Duration { return 50 * time.Millisecond }
func (b *backoff) reset()               { b.n, b.d = 0, 0 }

func (b *backoff) next() time.Duration {
	b.n++
	if b.d == 0 {
		b.d = b.first()
	} else {
		b.d = min(2*b.d, cmp.Or(b.max, 5*time.Second))
	}
	return b.d
}

// every reports true at most once per period (for rate-limited logging).
func (b *backoff) every(period time.Duration) bool {
	if time.Since(b.last) < period {
		return false
	}
	b.last = time.Now()
	return true
}
