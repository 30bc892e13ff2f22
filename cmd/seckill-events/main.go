// Command seckill-events shows how to consume seckill's order events: it
// prints each one as a JSON line ({"id", "type", "order_id", "item_id",
// "user_id", "status", "at"}) as it arrives.
//
// From NATS JetStream (the service's SECKILL_NATS_URL), stream
// SECKILL_ORDERS, subject seckill.orders.<item_id>:
//
//	seckill-events -nats nats://127.0.0.1:4222 [-item 7] [-durable fulfilment] [-new]
//
// Without -durable it reads through an ordered consumer that lives as long
// as the command (from the stream's start, or only new events with -new).
// With -durable it reads through the named durable consumer, made if
// missing, and acknowledges each event once printed: started again, it
// goes on after the last acknowledged event, as a fulfilment worker
// would. Delivery is at least once; an event's id is unique, so a
// consumer that must act once skips ids it has seen.
//
// From the admin feed (no NATS needed; the embedded default):
//
//	seckill-events -feed http://127.0.0.1:8080 -token $SECKILL_ADMIN_TOKEN [-after N]
//
// It polls GET /api/v1/admin/events every -poll (1 s) from cursor -after.
//
// -n N stops after N events. The command stops on SIGINT or SIGTERM.
// Exit status: 0 done, 1 a failure (printed), 2 bad flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
