// Command eventlag measures how long an order's event takes to reach a
// JetStream consumer: from the order's 2xx (201 for lua and lock, 202 for
// lua-async) to its created event at an ordered consumer of the item's
// subject, while orders come at a steady rate (open loop).
//
//	go run ./loadtest/eventlag -url http://127.0.0.1:8080 -token $TOKEN \
//	    -nats nats://127.0.0.1:4222 -strategy lua -rate 3000 -duration 10s
//
// The service must run with SECKILL_NATS_URL set to the same server and
// its per-user and per-address rate limits off (SECKILL_RATE_USER=0,
// SECKILL_RATE_IP=0). It creates an item of its own, subscribes to its
// subject before the first order, and prints the achieved rate, the lag's
// p50, p99 and max, and how many acknowledged orders had no event within
// -wait of the last one. It always stops by itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("eventlag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "the service's base URL (loopback only)")
	fs.StringVar(&c.token, "token", "", "admin token (creates the item)")
	fs.StringVar(&c.nats, "nats", "nats://127.0.0.1:4222", "the NATS server the service relays to")
	fs.StringVar(&c.prefix, "subject-prefix", "seckill.orders", "the events' subject prefix")
	fs.StringVar(&c.stream, "stream", "SECKILL_ORDERS", "the events' stream")
	fs.StringVar(&c.strategy, "strategy", "lua", "lua, lock or lua-async")
	fs.IntVar(&c.rate, "rate", 1000, "orders a second (open loop)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long orders are sent")
	fs.DurationVar(&c.wait, "wait", 10*time.Second, "how long to wait for the last events after the load")
	fs.IntVar(&c.inflight, "inflight", 512, "orders in flight at most (a slower service drops below -rate; the achieved rate is printed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(stderr, "eventlag:", err)
		return 2
	}
	res, err := measure(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "eventlag:", err)
		return 1
	}
	res.print(stdout, c)
	if res.missing > 0 {
		return 1
	}
	return 0
}
