package gate

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// EachMaster runs fn on every master of rdb: each master of a Redis Cluster
// (concurrently, the first error returned), or rdb itself otherwise. It is
// for what each master answers for itself (its configuration, its health),
// which one node of a Cluster cannot answer for the others. addr names
// the master for messages.
func EachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, addr string, c redis.Cmdable) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return fn(ctx, m.Options().Addr, m)
		})
	case *redis.Client:
		return fn(ctx, c.Options().Addr, c)
	default:
		return fn(ctx, "redis", rdb)
	}
}
