// Command loadtest drives a seckill service with order traffic and verifies
// that the sale stayed correct: no oversell, one order per user, every
// acknowledged order persisted, idempotent replays, consistent counters.
//
//	go run ./loadtest -embedded                       # whole proof, nothing installed
//	go run ./loadtest -url http://127.0.0.1:8080 -token $TOKEN -strategies lua,lock
//
// See loadtest/README.md for every flag. The core lives in loadtest/harness.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/loadtest/harness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg          harness.Config
		strategies   string
		embedded     bool
		redisURL     string
		keyPrefix    string
		dsn          string
		sqlitePath   string
		historyPath  string
		reportPath   string
		jsonPath     string
		quiet        bool
		seed         uint64
		baselineFlag time.Duration
		sweep        string
		sweepSeconds float64
		roomLottery  bool
	)
	var urls urlList
	fs.Var(&urls, "url", "service base URL (loopback only; default http://127.0.0.1:8080); repeat it, or separate with commas, to spread orders round-robin over several instances (admin calls and checks go to the first)")
	fs.StringVar(&cfg.AdminToken, "token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin bearer token (default $SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&cfg.AdminURL, "admin-url", "", "admin listener base URL when the service has SECKILL_ADMIN_ADDR (loopback only); empty = -url")
	fs.BoolVar(&embedded, "embedded", false, "start the service in-process (default: miniredis + SQLite in a temp dir) and ignore -url/-token")
	fs.StringVar(&redisURL, "redis", "", "with -embedded: Redis URL for the in-process service (default: in-process miniredis)")
	fs.StringVar(&keyPrefix, "key-prefix", "", "with -embedded: Redis key prefix for the in-process service")
	fs.StringVar(&strategies, "strategies", "lua,lock,lua-async", "comma-separated strategies, one fresh item each (empty element = server default)")
	fs.IntVar(&cfg.Stock, "stock", 100, "stock S per item")
	fs.IntVar(&cfg.Buckets, "buckets", 0, "buckets per item, every strategy (1 to 64: gate buckets and bucket rows; 0 = server default, 1)")
	fs.IntVar(&cfg.Attempts, "n", 2000, "order attempts per strategy (replays included)")
	fs.IntVar(&cfg.Users, "users", 1000, "distinct users per strategy")
	fs.Float64Var(&cfg.RepeatShare, "repeat", 0.1, "share of attempts by a user who already tried (fresh Idempotency-Key)")
	fs.Float64Var(&cfg.RetryShare, "retry", 0.05, "share of attempts replaying an earlier request (same Idempotency-Key and body)")
	fs.StringVar(&cfg.Mode, "mode", harness.ModeClosed, "closed (C workers), open (fixed rate, latency from the intended send time) or room (-users buyers go through the item's waiting room; see -room-*)")
	fs.IntVar(&cfg.Concurrency, "c", 32, "closed loop: workers; open loop: max requests in flight")
	fs.Float64Var(&cfg.Rate, "rate", 500, "open loop: requests per second")
	fs.DurationVar(&cfg.MaxDuration, "duration", 60*time.Second, "cap on each strategy's load phase")
	fs.DurationVar(&cfg.RequestTimeout, "timeout", 10*time.Second, "per-request timeout")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "how long to wait for 202-accepted orders to be persisted")
	fs.DurationVar(&baselineFlag, "baseline", 2*time.Second, "length of the GET /healthz baseline (0 = skip)")
	fs.StringVar(&dsn, "dsn", "", "MySQL/MariaDB DSN of the service's database, for the DB-side checks (with -embedded: also the service's database)")
	fs.StringVar(&sqlitePath, "sqlite", "", "path of the service's SQLite file, for the DB-side checks")
	fs.StringVar(&historyPath, "history", "", "write every request as JSONL to this file")
	fs.StringVar(&reportPath, "report", "", "write a chart to this .html or .svg file")
	fs.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	fs.IntVar(&cfg.Room.Late, "room-late", 0, "room mode: users who join after the opening, besides the -users who join before it")
	fs.IntVar(&cfg.Room.Rate, "room-rate", 500, "room mode: the room's admit_per_second R")
	fs.DurationVar(&cfg.Room.PassTTL, "room-pass-ttl", 60*time.Second, "room mode: the pass lifetime (whole seconds, 5s to 1h)")
	fs.DurationVar(&cfg.Room.OpenIn, "room-open-in", 0, "room mode: how far ahead starts_at is set (0 = 3s + 1ms a user)")
	fs.BoolVar(&roomLottery, "room-lottery", true, "room mode: the opening draw (false: the pre-queue is served in ticket order)")
	fs.Float64Var(&cfg.Room.PassFactor, "room-pass-factor", 1, "room mode: the service's SECKILL_ROOM_PASS_FACTOR (live passes <= factor x remaining stock)")
	fs.IntVar(&cfg.Room.Probes, "room-probes", 3, "room mode: refused orders sent of each kind (no pass, forged, another user's, reused); 0 = none")
	fs.BoolVar(&quiet, "q", false, "no progress lines")
	fs.Uint64Var(&seed, "seed", 0, "plan seed (0 = from the clock)")
	fs.StringVar(&sweep, "sweep", "", "open-loop rate sweep: comma-separated rates (e.g. 1000,2000,4000); -report then draws latency against rate (.svg)")
	fs.Float64Var(&sweepSeconds, "sweep-seconds", 5, "with -sweep: seconds of load at each rate")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	if len(urls) == 0 {
		urls = urlList{"http://127.0.0.1:8080"}
	}
	cfg.BaseURL, cfg.URLs = urls[0], urls
	cfg.Room.NoLottery = !roomLottery
	if cfg.Room.Probes == 0 {
		cfg.Room.Probes = -1
	}
	if cfg.Mode == harness.ModeRoom {
		durationSet := false
		fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
		if !durationSet {
			cfg.MaxDuration = 0 // the room's own default: the opening's wait, the sale at R, and a minute
		}
		if sweep != "" {
			fmt.Fprintln(stderr, "-sweep does not go with -mode room")
			return 2
		}
	}
	cfg.Seed = seed
	cfg.Strategies = strings.Split(strategies, ",")
	for i := range cfg.Strategies {
		cfg.Strategies[i] = strings.TrimSpace(cfg.Strategies[i])
	}
	cfg.BaselineDuration = baselineFlag
	if baselineFlag == 0 {
		cfg.BaselineDuration = -1
	}
	if reportPath != "" {
		if ext := strings.ToLower(filepath.Ext(reportPath)); ext != ".html" && ext != ".svg" {
			fmt.Fprintln(stderr, "-report must end in .html or .svg")
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if embedded {
		svc, err := startEmbedded(ctx, embeddedOptions{MySQLDSN: dsn, RedisURL: redisURL, KeyPrefix: keyPrefix, Log: stderr})
		if err != nil {
			fmt.Fprintf(stderr, "embedded service: %v\n", err)
			return 1
		}
		defer svc.Close()
		cfg.BaseURL, cfg.URLs, cfg.AdminToken = svc.BaseURL, nil, svc.AdminToken
		if dsn == "" && sqlitePath == "" {
			sqlitePath = svc.SQLitePath
		}
		fmt.Fprintf(stderr, "embedded service on %s (%s)\n", svc.BaseURL, svc.Describe)
	}
	if cfg.AdminToken == "" {
		fmt.Fprintln(stderr, "no admin token: pass -token or set SECKILL_ADMIN_TOKEN (or use -embedded)")
		return 2
	}

	switch {
	case dsn != "":
		st, err := harness.OpenMySQL(dsn)
		if err != nil {
			fmt.Fprintf(stderr, "-dsn: %v\n", err)
			return 1
		}
		defer st.Close()
		cfg.Store = st
	case sqlitePath != "":
		st, err := harness.OpenSQLite(sqlitePath)
		if err != nil {
			fmt.Fprintf(stderr, "-sqlite: %v\n", err)
			return 1
		}
		defer st.Close()
		cfg.Store = st
	}

	if historyPath != "" {
		f, err := os.Create(historyPath)
		if err != nil {
			fmt.Fprintf(stderr, "-history: %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.History = f
	}
	if !quiet {
		cfg.Progress = stderr
		if f, ok := stderr.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				cfg.ProgressTTY = true
			}
		}
	}

	if sweep != "" {
		return runSweep(ctx, cfg, sweep, sweepSeconds, reportPath, stdout, stderr)
	}
	rep, err := harness.Run(ctx, cfg)
	if rep != nil {
		rep.WriteText(stdout)
		if werr := writeOutputs(rep, reportPath, jsonPath); werr != nil {
			fmt.Fprintln(stderr, werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	if !rep.Pass {
		return 1
	}
	return 0
}

// urlList is the -url flag: repeatable, each value one URL or several
// separated by commas.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			return errors.New("empty URL")
		}
		*u = append(*u, s)
	}
	return nil
}

func writeOutputs(rep *harness.Report, reportPath, jsonPath string) error {
	if reportPath != "" {
		f, err := os.Create(reportPath)
		if err != nil {
			return fmt.Errorf("-report: %w", err)
		}
		if strings.EqualFold(filepath.Ext(reportPath), ".svg") {
			err = rep.WriteSVG(f)
		} else {
			err = rep.WriteHTML(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-report: %w", err)
		}
	}
	if jsonPath != "" {
		f, err := os.Create(jsonPath)
		if err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		err = rep.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	return nil
}

// runSweep runs the open-loop rate sweep and writes its table, and its
// chart when -report names an .svg file.
func runSweep(ctx context.Context, cfg harness.Config, list string, seconds float64, reportPath string, stdout, stderr io.Writer) int {
	var rates []float64
	for _, f := range strings.Split(list, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			fmt.Fprintf(stderr, "-sweep: %q is not a positive rate\n", f)
			return 2
		}
		rates = append(rates, r)
	}
	if seconds <= 0 {
		fmt.Fprintln(stderr, "-sweep-seconds must be positive")
		return 2
	}
	if reportPath != "" && !strings.EqualFold(filepath.Ext(reportPath), ".svg") {
		fmt.Fprintln(stderr, "with -sweep, -report must end in .svg")
		return 2
	}
	points, err := harness.Sweep(ctx, cfg, rates, seconds, stderr)
	harness.WriteSweepText(stdout, points)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	if reportPath != "" {
		f, err := os.Create(reportPath)
		if err != nil {
			fmt.Fprintf(stderr, "-report: %v\n", err)
			return 1
		}
		title := fmt.Sprintf("seckill open-loop latency sweep, %s (%d s per rate)", time.Now().UTC().Format("2006-01-02 15:04 UTC"), int(seconds))
		err = harness.WriteSweepSVG(f, title, points)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintf(stderr, "-report: %v\n", err)
			return 1
		}
	}
	for _, p := range points {
		if !p.Pass {
			fmt.Fprintln(stdout, "RESULT: FAIL (a sweep run broke an invariant)")
			return 1
		}
	}
	fmt.Fprintln(stdout, "RESULT: PASS")
	return 0
}
