package room

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts run through redis.Script, which tries EVALSHA and falls back to
// EVAL on NOSCRIPT. ticket.lua is a function, not a script: it is put in
// front of the two scripts that answer a ticket's status.
var (
	//go:embed setup.lua
	setupSource string
	//go:embed ticket.lua
	ticketSource string
	//go:embed join.lua
	joinSource string
	//go:embed status.lua
	statusSource string
	//go:embed freeze.lua
	freezeSource string
	//go:embed open.lua
	openSource string
	//go:embed admit.lua
	admitSource string
	//go:embed consume.lua
	consumeSource string
	//go:embed close.lua
	closeSource string
	//go:embed ttl.lua
	passTTLSource string

	setupScript   = redis.NewScript(setupSource)
	joinScript    = redis.NewScript(ticketSource + joinSource)
	statusScript  = redis.NewScript(ticketSource + statusSource)
	freezeScript  = redis.NewScript(freezeSource)
	openScript    = redis.NewScript(openSource)
	admitScript   = redis.NewScript(admitSource)
	consumeScript = redis.NewScript(consumeSource)
	closeScript   = redis.NewScript(closeSource)
	passTTLScript = redis.NewScript(passTTLSource)
	// markScript reads the clock of the node holding KEYS[1] (Mark).
	markScript = redis.NewScript(`local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`)
)
