package lock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts run through redis.Script, which tries EVALSHA and falls back to EVAL
// on NOSCRIPT, so a SCRIPT FLUSH or a fresh server costs one extra round trip.
var (
	//go:embed obtain.lua
	obtainSource string
	//go:embed release.lua
	releaseSource string
	//go:embed refresh.lua
	refreshSource string
	//go:embed leave.lua
	leaveSource string
	//go:embed seed.lua
	seedSource string

	obtainScript  = redis.NewScript(obtainSource)
	releaseScript = redis.NewScript(releaseSource)
	refreshScript = redis.NewScript(refreshSource)
	leaveScript   = redis.NewScript(leaveSource)
	seedScript    = redis.NewScript(seedSource)
)
