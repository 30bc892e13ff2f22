package gate

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The gate's scripts, one file each under lua/. Every script replies a
// table whose first element is a status word ('ok', or what happened),
// data after (see Reply). KEYS and ARGV get names on the scripts' first
// lines.
var (
	//go:embed lua/admit.lua
	admitSrc string
	//go:embed lua/reserve.lua
	reserveSrc string
	//go:embed lua/handback.lua
	handBackSrc string
	//go:embed lua/handbackhome.lua
	handBackHomeSrc string
	//go:embed lua/dropbuyer.lua
	dropBuyerSrc string
	//go:embed lua/rebuild.lua
	rebuildSrc string
	//go:embed lua/setstock.lua
	setStockSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/repair.lua
	repairSrc string
	//go:embed lua/moveout.lua
	moveOutSrc string
	//go:embed lua/movein.lua
	moveInSrc string
	//go:embed lua/adjust.lua
	adjustSrc string
	//go:embed lua/markroom.lua
	markRoomSrc string

	reserveScript      = redis.NewScript(admitSrc + reserveSrc)
	handBackScript     = redis.NewScript(handBackSrc)
	handBackHomeScript = redis.NewScript(handBackHomeSrc)
	dropBuyerScript    = redis.NewScript(dropBuyerSrc)
	rebuildScript      = redis.NewScript(rebuildSrc)
	setStockScript     = redis.NewScript(setStockSrc)
	releaseScript      = redis.NewScript(releaseSrc)
	repairScript       = redis.NewScript(repairSrc)
	moveOutScript      = redis.NewScript(moveOutSrc)
	moveInScript       = redis.NewScript(moveInSrc)
	adjustScript       = redis.NewScript(adjustSrc)
	markRoomScript     = redis.NewScript(markRoomSrc)
)

// ReserveScript is the reserve script, for tests that catch it in flight.
func ReserveScript() *redis.Script { return reserveScript }

// AdmitLua is the prelude of every script that sells a unit (it defines
// refusal(): the sale window, the buyer's one unit, what is left). A
// script that uses it is loaded as AdmitLua + its own source.
func AdmitLua() string { return admitSrc }

// Reply reads a script's reply by the scripts' one convention: a table
// whose first element is a status word, data after.
func Reply(res []any) (status string, data []any, err error) {
	if len(res) == 0 {
		return "", nil, errors.New("redis: script replied nothing")
	}
	status, ok := res[0].(string)
	if !ok {
		return "", nil, fmt.Errorf("redis: script reply without a status: %v", res)
	}
	return status, res[1:], nil
}

// runStatus runs a script whose reply is its status alone.
func runStatus(ctx context.Context, rdb redis.Scripter, script *redis.Script, op string, keys []string, args ...any) (string, error) {
	res, err := script.Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return "", Error(op, err)
	}
	status, _, err := Reply(res)
	return status, err
}
