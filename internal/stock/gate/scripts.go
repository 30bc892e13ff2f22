package gate

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The gate's scripts, one file each under lua/.
var (
	//go:embed lua/reserve.lua
	reserveSrc string
	//go:embed lua/handback.lua
	handBackSrc string
	//go:embed lua/build.lua
	buildSrc string
	//go:embed lua/buildbuyers.lua
	buildBuyersSrc string
	//go:embed lua/setstock.lua
	setStockSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/repair.lua
	repairSrc string
	//go:embed lua/restock.lua
	restockSrc string

	reserveScript     = redis.NewScript(reserveSrc)
	handBackScript    = redis.NewScript(handBackSrc)
	buildScript       = redis.NewScript(buildSrc)
	buildBuyersScript = redis.NewScript(buildBuyersSrc)
	setStockScript    = redis.NewScript(setStockSrc)
	releaseScript     = redis.NewScript(releaseSrc)
	repairScript      = redis.NewScript(repairSrc)
	restockScript     = redis.NewScript(restockSrc)
)

// ReserveScript is the reserve script, for tests that catch it in flight.
func ReserveScript() *redis.Script { return reserveScript }
