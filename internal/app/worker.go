package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
)

// workerReport is how often a worker logs its queue.
const workerReport = 10 * time.Second

// runWorker runs lua-async writers with no HTTP API: more writers for a
// busy sale, on other hosts, without more API instances. It is the store
// and the queue's writers, nothing else. It shares Redis and the database
// with the service, so it needs real ones. With SECKILL_ADMIN_ADDR it
// serves /healthz and /metrics there.
func runWorker(ctx context.Context, cfg Config, log *slog.Logger, stdout, stderr io.Writer) int {
	if cfg.RedisURL == "" || cfg.MySQLDSN == "" {
		fmt.Fprintln(stderr, "seckill worker: needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN: the embedded Redis and SQLite live inside one service process, which runs its own writers")
		return 2
	}
	if cfg.Writers < 0 {
		fmt.Fprintln(stderr, "seckill worker: SECKILL_WRITERS=0: a worker without writers has nothing to do")
		return 2
	}
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "seckill worker: %v\n", err)
		return 1
	}
	w, closeAll, err := startWorker(ctx, cfg, log, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "seckill worker: %v\n", err)
		return 1
	}
	defer closeAll()
	errc := make(chan error, 1)
	var srv *http.Server
	if cfg.AdminAddr != "" {
		l, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			fmt.Fprintf(stderr, "seckill worker: admin listen: %v\n", err)
			return 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		})
		mux.Handle("GET /metrics", w.metrics.Handler())
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		fmt.Fprintf(stdout, "  /healthz and /metrics on %s\n", l.Addr())
		go func() { errc <- srv.Serve(l) }()
	}
	tick := time.NewTicker(workerReport)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if srv != nil {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = srv.Shutdown(sctx)
				cancel()
			}
			fmt.Fprintln(stdout, "seckill worker: stopping after the current batches")
			return 0
		case err := <-errc:
			if !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(stderr, "seckill worker: %v\n", err)
				return 1
			}
		case <-tick.C:
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			q, err := w.writers.Backlog(qctx)
			cancel()
			if err != nil {
				log.Warn("worker: backlog not read", "err", err)
				continue
			}
			log.Info("worker: lua-async backlog", "queued", q.Queued, "unacked", q.Unacked,
				"dead_letters", q.DeadLetters, "oldest_age", q.OldestAge.Round(time.Millisecond))
		}
	}
}

// worker is what seckill worker runs: the queue's writers over the store.
type worker struct {
	writers *queue.Writers
	metrics *metrics.Metrics
}

// startWorker opens Redis and the database and starts the writers;
// closeAll stops the writers, then closes the backends.
func startWorker(ctx context.Context, cfg Config, log *slog.Logger, stdout io.Writer) (w *worker, closeAll func(), err error) {
	var closers []func()
	closeOpened := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	// Not closeAll, which "return nil, nil, err" sets to nil before this
	// runs.
	defer func() {
		if err != nil {
			closeOpened()
		}
	}()
	rdb, _, rdesc, err := openRedis(ctx, cfg.RedisMode, cfg.RedisURL, cfg.RedisTimeout, log)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = rdb.Close() })
	db, ddesc, _, err := database.Open(ctx, cfg.MySQLDSN, cfg.SQLitePath)
	if err != nil {
		return nil, nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = sqlDB.Close() })
	st, err := store.New(db, &store.Options{PaymentTimeout: cfg.PaymentTimeout})
	if err != nil {
		return nil, nil, err
	}
	if cfg.AsyncDurability == queue.DurabilityFsync {
		// As the service does: a worker of a sale that asks for fsync
		// starts only on a Redis that gives it.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := queue.CheckFsync(cctx, rdb)
		cancel()
		if err != nil {
			return nil, nil, err
		}
	}
	keys, err := gate.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, nil, err
	}
	m := metrics.New(handler.ErrorCode)
	m.WatchRedis(rdb)
	m.WatchDB(sqlDB)
	writers, err := queue.StartWriters(st, rdb, keys, queue.Config{Writers: cfg.Writers, Batch: cfg.WriterBatch,
		ClaimIdle: cfg.ClaimIdle, MaxDeliveries: cfg.MaxDeliveries, Observer: m,
		AfterCommit: crashAfterCommit(os.Getenv), Durability: cfg.AsyncDurability}, log)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, writers.Close)
	fmt.Fprintf(stdout, "seckill worker: %d lua-async writers\n", writers.Count())
	for _, b := range []string{rdesc, ddesc} {
		fmt.Fprintf(stdout, "  backend: %s\n", b)
	}
	return &worker{writers: writers, metrics: m}, closeOpened, nil
}
