package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"

	"github.com/seckill/seckill/internal/database"
)

const usage = `seckill: a flash-sale inventory service.

Usage:
  seckill [serve] [flags]   serve the HTTP API (default)
  seckill worker [flags]    run lua-async writers only (no HTTP API); needs
                            SECKILL_REDIS_URL and SECKILL_MYSQL_DSN
  seckill migrate [flags]   apply database migrations and exit
  seckill reconcile [-item N] [-dry-run] [-json] [flags]
                            compare each item's Redis state with the database
                            and repair Redis where that is safe; exit 1 if
                            drift remains

Every flag can also be set by the environment variable named in its help.
With nothing set, seckill runs on an embedded Redis and an SQLite file.

Flags:
`

// Main runs the command line and returns the exit code.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "migrate" || args[0] == "worker" || args[0] == "reconcile") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf reconcileFlags
	if cmd == "reconcile" {
		fs.Int64Var(&rf.item, "item", 0, "reconcile this item only; 0 = every item")
		fs.BoolVar(&rf.dryRun, "dry-run", false, "report only, repair nothing")
		fs.BoolVar(&rf.json, "json", false, "print one JSON object per item")
	}
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	cfg, err := ParseConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "seckill: configuration:\n%v\n", err)
		return 2
	}
	log := NewLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "migrate":
		return runMigrate(ctx, cfg, stdout, stderr)
	case "worker":
		return runWorker(ctx, cfg, log, stdout, stderr)
	case "reconcile":
		return runReconcile(ctx, cfg, log, rf, stdout, stderr)
	default:
		return runServe(ctx, cfg, log, stdout, stderr)
	}
}

func runServe(ctx context.Context, cfg Config, log *slog.Logger, stdout, stderr io.Writer) int {
	a, err := New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "seckill: %v\n", err)
		return 1
	}
	defer a.Close()
	l, err := net.Listen("tcp", a.addr())
	if err != nil {
		fmt.Fprintf(stderr, "seckill: listen: %v\n", err)
		return 1
	}
	var admin net.Listener
	if cfg.AdminAddr != "" {
		if admin, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
			_ = l.Close()
			fmt.Fprintf(stderr, "seckill: admin listen: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "seckill listening on %s\n", l.Addr())
	consoleAddr := l.Addr()
	if admin != nil {
		fmt.Fprintf(stdout, "  admin API, console, /metrics%s on %s\n", map[bool]string{true: " and pprof"}[cfg.Pprof], admin.Addr())
		consoleAddr = admin.Addr()
	}
	fmt.Fprintf(stdout, "  admin console: http://%s/admin/  sale pages: http://%s/sale/{id}\n", consoleAddr, l.Addr())
	for _, b := range a.Backends() {
		fmt.Fprintf(stdout, "  backend: %s\n", b)
	}
	fmt.Fprintf(stdout, "  default strategy: %s\n", a.service.DefaultStrategy())
	if cfg.AdminToken == "" {
		fmt.Fprintf(stdout, "  admin token (generated for this run): %s\n", a.AdminToken())
	} else {
		fmt.Fprintln(stdout, "  admin token: from SECKILL_ADMIN_TOKEN")
	}
	if err := a.Serve(ctx, l, admin); err != nil {
		fmt.Fprintf(stderr, "seckill: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "seckill stopped")
	return 0
}

func runMigrate(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	if cfg.SQLitePath == "" {
		cfg.SQLitePath = DefaultSQLitePath
	}
	db, desc, applied, err := database.Open(ctx, cfg.MySQLDSN, cfg.SQLitePath)
	if err != nil {
		fmt.Fprintf(stderr, "seckill migrate: %v\n", err)
		return 1
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "%s: schema already up to date\n", desc)
		return 0
	}
	fmt.Fprintf(stdout, "%s: applied migrations %v\n", desc, applied)
	return 0
}

// NewLogger builds the service's logger from cfg: JSON or text (text by
// default when both backends are embedded, JSON otherwise) at LogLevel.
func NewLogger(cfg Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel) // validated by ParseConfig
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if cfg.RedisURL == "" && cfg.MySQLDSN == "" {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
