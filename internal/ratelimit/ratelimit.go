// Package ratelimit is a distributed rate limit in Redis (GCRA, via
// github.com/go-redis/redis_rate), so every instance shares one budget.
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limit is a rate with its burst. The zero Limit is "off".
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// Off reports whether the limit admits everything.
func (l Limit) Off() bool { return l.Rate == 0 }

func (l Limit) String() string {
	if l.Off() {
		return "0"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[l.Period]
	if l.Burst == l.Rate {
		return fmt.Sprintf("%d/%s", l.Rate, unit)
	}
	return fmt.Sprintf("%d/%s:%d", l.Rate, unit, l.Burst)
}

// Parse reads "0" (off), "N/s", "N/m" or "N/h", optionally followed by
// ":B" for a burst B (default N): "10/s", "600/m:20".
func Parse(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return Limit{}, nil
	}
	rate, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Limit{}, fmt.Errorf("%q: want N/s, N/m or N/h (optionally :burst), or 0 for off", s)
	}
	unit, burstStr, hasBurst := strings.Cut(rest, ":")
	n, err := strconv.Atoi(rate)
	if err != nil || n <= 0 {
		return Limit{}, fmt.Errorf("%q: the rate must be a positive integer", s)
	}
	l := Limit{Rate: n, Burst: n}
	switch unit {
	case "s":
		l.Period = time.Second
	case "m":
		l.Period = time.Minute
	case "h":
		l.Period = time.Hour
	default:
		return Limit{}, fmt.Errorf("%q: the period must be s, m or h", s)
	}
	if hasBurst {
		if l.Burst, err = strconv.Atoi(burstStr); err != nil || l.Burst <= 0 {
			return Limit{}, fmt.Errorf("%q: the burst must be a positive integer", s)
		}
	}
	return l, nil
}

// Limiter admits keys at a Limit. A nil *Limiter admits everything.
type Limiter struct {
	rl     *redis_rate.Limiter
	prefix string
	limit  redis_rate.Limit
}

// New returns a Limiter on rdb whose Redis keys start with prefix, or nil
// when limit is off.
func New(rdb redis.UniversalClient, prefix string, limit Limit) *Limiter {
	if limit.Off() {
		return nil
	}
	return &Limiter{rl: redis_rate.NewLimiter(rdb), prefix: prefix,
		limit: redis_rate.Limit{Rate: limit.Rate, Period: limit.Period, Burst: limit.Burst}}
}

// Allow takes one unit of key's budget. It returns 0 when admitted, else how
// long until the next unit. err is a Redis failure.
func (l *Limiter) Allow(ctx context.Context, key string) (retryAfter time.Duration, err error) {
	if l == nil {
		return 0, nil
	}
	res, err := l.rl.Allow(ctx, l.prefix+key, l.limit)
	if err != nil {
		return 0, err
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	return max(res.RetryAfter, time.Millisecond), nil
}
