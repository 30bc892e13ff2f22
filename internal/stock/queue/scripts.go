package queue

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
)

// The queue's scripts, one file each under lua/, by the gate's reply
// convention (gate.Reply). enqueue.lua is loaded after the gate's admit
// prelude, which it shares with the gate's reserve.lua.
var (
	//go:embed lua/enqueue.lua
	enqueueSrc string
	//go:embed lua/renew.lua
	renewSrc string
	//go:embed lua/takeover.lua
	takeoverSrc string
	//go:embed lua/requeue.lua
	requeueSrc string

	enqueueScript  = redis.NewScript(gate.AdmitLua() + enqueueSrc)
	renewScript    = redis.NewScript(renewSrc)
	takeoverScript = redis.NewScript(takeoverSrc)
	requeueScript  = redis.NewScript(requeueSrc)
)

// EnqueueScript is the enqueue script, for tests that catch it in flight.
func EnqueueScript() *redis.Script { return enqueueScript }

// TakeoverScript is the takeover script, for tests of it.
func TakeoverScript() *redis.Script { return takeoverScript }

// RenewScript is the renew script, for tests of it.
func RenewScript() *redis.Script { return renewScript }
