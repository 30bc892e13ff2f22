package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
)

type reconcileFlags struct {
	item   int64
	dryRun bool
	json   bool
}

// runReconcile compares items' Redis state with the database and repairs
// Redis where that is safe, as POST /api/v1/admin/items/{id}/reconcile
// does. Exit code 0: Redis agrees (or was repaired); 1: drift remains or an
// item could not be read; 2: bad usage.
func runReconcile(ctx context.Context, cfg Config, log *slog.Logger, rf reconcileFlags, stdout, stderr io.Writer) int {
	if cfg.RedisURL == "" {
		fmt.Fprintln(stderr, "seckill reconcile: needs SECKILL_REDIS_URL: the embedded Redis lives inside the service process; reconcile there with POST /api/v1/admin/items/{id}/reconcile")
		return 2
	}
	cfg.Writers = queue.NoWriters // a reconcile writes no queued orders
	if cfg.AdminToken == "" {
		cfg.AdminToken = randomToken() // no admin API here
	}
	a, err := New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "seckill reconcile: %v\n", err)
		return 1
	}
	defer a.Close()
	ids := []int64{rf.item}
	if rf.item == 0 {
		if ids, err = a.service.ItemIDs(ctx); err != nil {
			fmt.Fprintf(stderr, "seckill reconcile: %v\n", err)
			return 1
		}
	}
	code := 0
	enc := json.NewEncoder(stdout)
	for _, id := range ids {
		r, err := a.service.Reconcile(ctx, id, !rf.dryRun)
		if err != nil {
			fmt.Fprintf(stderr, "item %d: %v\n", id, err)
			code = 1
			continue
		}
		if len(r.Drift) > 0 && !r.Repaired {
			code = 1
		}
		if rf.json {
			_ = enc.Encode(handler.ReconciliationView(r))
			continue
		}
		printReconciliation(stdout, r)
	}
	if len(ids) == 0 && !rf.json {
		fmt.Fprintln(stdout, "no items")
	}
	return code
}

func printReconciliation(w io.Writer, r *stock.Reconciliation) {
	fmt.Fprintf(w, "item %d (%s): database stock %d, sold %d, %d live orders", r.ItemID, r.Strategy, r.Stock, r.Sold, r.Orders)
	if r.FailedOrders > 0 {
		fmt.Fprintf(w, ", %d failed", r.FailedOrders)
	}
	switch {
	case !r.Gated:
		fmt.Fprintln(w, "; no stock in Redis")
	case !r.GatePresent:
		fmt.Fprintln(w, "; Redis: no gate")
	default:
		fmt.Fprintf(w, "; Redis: stock %d, taken %d (expected %d), %d buyers, %d queued, %d dead letters\n",
			r.GateStock, r.GateTaken, r.ExpectedTaken, r.Buyers, r.Queued, r.DeadLetters)
	}
	if len(r.Drift) == 0 {
		fmt.Fprintln(w, "  ok: Redis agrees with the database")
		return
	}
	for _, d := range r.Drift {
		fmt.Fprintf(w, "  drift: %s\n", d)
	}
	switch {
	case r.Repaired:
		fmt.Fprintf(w, "  repaired: %s\n", r.Note)
	case r.Note != "":
		fmt.Fprintf(w, "  %s\n", r.Note)
	default:
		fmt.Fprintln(w, "  not repaired (dry run)")
	}
}
