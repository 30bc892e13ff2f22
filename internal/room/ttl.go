package room

import (
	"context"
	"fmt"
	"time"
)

// SetPassTTL changes the lifetime of the passes admitted from now on (a
// pass already issued keeps its expiry). It is ErrNoRoom without a room.
func (r *Room) SetPassTTL(ctx context.Context, passTTL time.Duration) error {
	if passTTL < MinPassTTL {
		return fmt.Errorf("%w: pass ttl %v below %v", ErrInvalid, passTTL, MinPassTTL)
	}
	res, err := passTTLScript.Run(ctx, r.rdb, []string{r.k.meta}, passTTL.Milliseconds()).Text()
	if err != nil {
		return unavailable(err)
	}
	if res == "noroom" {
		return ErrNoRoom
	}
	return nil
}
