package gate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
)

// Error wraps a Redis failure of op, marking it stock.ErrUnavailable unless
// Redis answered with an error that says the request itself was wrong (a
// bug, not an outage).
func Error(op string, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, transient := range []string{"LOADING", "BUSY", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "MOVED", "ASK"} {
			if strings.HasPrefix(msg, transient) {
				return fmt.Errorf("redis: %s: %w: %w", op, stock.ErrUnavailable, err)
			}
		}
		return fmt.Errorf("redis: %s: %w", op, err)
	}
	return fmt.Errorf("redis: %s: %w: %w", op, stock.ErrUnavailable, err)
}

// ErrMissing means the item's gate is not in Redis (never built, or Redis
// lost it): build it from the database and try again.
var ErrMissing = errors.New("the item's gate is missing in Redis")

// DupError is the gate's "already purchased", with the order id it holds.
type DupError struct{ OrderID string }

func (e *DupError) Error() string        { return "already purchased (order " + e.OrderID + ")" }
func (e *DupError) Is(target error) bool { return target == stock.ErrAlreadyPurchased }
