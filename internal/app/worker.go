package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// workerReport is how often a worker logs its queue.
const workerReport = 10 * time.Second

// runWorker runs lua-async writers with no HTTP API: more writers for a
// busy sale, on other hosts, without more API instances. It shares Redis
// and the database with the service, so it needs real ones. With
// SECKILL_ADMIN_ADDR it serves /healthz and /metrics there.
func runWorker(ctx context.Context, cfg Config, log *slog.Logger, stdout, stderr io.Writer) int {
	if cfg.RedisURL == "" || cfg.MySQLDSN == "" {
		fmt.Fprintln(stderr, "seckill worker: needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN: the embedded Redis and SQLite live inside one service process, which runs its own writers")
		return 2
	}
	if cfg.Writers < 0 {
		fmt.Fprintln(stderr, "seckill worker: SECKILL_WRITERS=0: a worker without writers has nothing to do")
		return 2
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = randomToken() // a worker serves no admin API
	}
	a, err := New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "seckill worker: %v\n", err)
		return 1
	}
	defer a.Close()
	fmt.Fprintf(stdout, "seckill worker: %d lua-async writers\n", writerCount(cfg.Writers))
	for _, b := range a.Backends() {
		fmt.Fprintf(stdout, "  backend: %s\n", b)
	}
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
		mux.Handle("GET /metrics", a.metrics.Handler())
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
			q, err := a.service.Backlog(qctx)
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
