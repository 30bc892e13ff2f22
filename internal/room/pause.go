package room

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed pause.lua
var pauseSource string

var pauseScript = redis.NewScript(pauseSource)

// SetPaused pauses admission (Admit admits nobody; expired passes still
// leave the live set) or resumes it. The flag is in Redis, so every
// instance's next Admit obeys it, whatever that instance knows of the
// pause. It is ErrNoRoom without a room.
func (r *Room) SetPaused(ctx context.Context, paused bool) error {
	v := "0"
	if paused {
		v = "1"
	}
	res, err := pauseScript.Run(ctx, r.rdb, []string{r.k.meta}, v).Text()
	if err != nil {
		return unavailable(err)
	}
	if res == "noroom" {
		return ErrNoRoom
	}
	return nil
}
