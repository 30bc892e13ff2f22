package room

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed pause.lua
var pauseSource string

var pauseScript = redis.NewScript(pauseSource)

// SetControl pauses admission (Admit admits nobody; expired passes still
// leave the live set) or resumes it, and caps the admissions a second at
// rateCap whatever rate a caller passes to Admit (0: no cap). The controls
// are in Redis, so every instance's next Admit obeys them, whatever that
// instance knows of the change. It is ErrNoRoom without a room.
func (r *Room) SetControl(ctx context.Context, paused bool, rateCap int) error {
	if rateCap < 0 {
		return fmt.Errorf("%w: rate cap %d", ErrInvalid, rateCap)
	}
	p := "0"
	if paused {
		p = "1"
	}
	res, err := pauseScript.Run(ctx, r.rdb, []string{r.k.meta}, p, rateCap).Text()
	if err != nil {
		return unavailable(err)
	}
	if res == "noroom" {
		return ErrNoRoom
	}
	return nil
}
