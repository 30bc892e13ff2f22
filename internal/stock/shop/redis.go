package shop

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
)

// redisError wraps err, marking it ErrUnavailable unless Redis answered with
// an error that says the request itself was wrong (a bug, not an outage).
func redisError(op string, err error) error {
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
