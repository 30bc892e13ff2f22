package app

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/ratelimit"
)

// Config is everything the service reads at start. Zero values mean the
// defaults documented on each field.
type Config struct {
	// Addr is the listen address (SECKILL_ADDR). Default ":8080".
	Addr string
	// RedisURL is redis://host:port/db (SECKILL_REDIS_URL). Empty: an
	// embedded in-process Redis (miniredis).
	RedisURL string
	// MySQLDSN is a go-sql-driver DSN (SECKILL_MYSQL_DSN). Empty: an
	// embedded pure-Go SQLite file at SQLitePath.
	MySQLDSN string
	// SQLitePath is the embedded database file (SECKILL_SQLITE_PATH).
	// Default "seckill.db".
	SQLitePath string
	// AdminToken is the admin bearer token (SECKILL_ADMIN_TOKEN). Required
	// with MySQL; generated and printed in embedded mode when empty.
	AdminToken string
	// Strategy is the default strategy of new items, "lua" or "lock"
	// (SECKILL_STRATEGY). Default "lua".
	Strategy string
	// KeyPrefix starts every Redis key (SECKILL_KEY_PREFIX). Default "seckill".
	KeyPrefix string
	// LockWait bounds how long a "lock" order waits for its item's lock
	// (SECKILL_LOCK_WAIT). Default 5s, or half the request timeout when
	// that is less; it must be under the request timeout.
	LockWait time.Duration
	// DBTimeout bounds each step (a statement, the commit) of a lua or lock
	// order transaction (SECKILL_DB_TIMEOUT), so a stalled database answers
	// 503 in about this long. Default 1s (5s with the embedded SQLite, whose
	// one connection queues every write), or half the request timeout when
	// that is less; it must be under the request timeout.
	DBTimeout time.Duration
	// RedisTimeout bounds each Redis call and the wait for a pooled
	// connection (SECKILL_REDIS_TIMEOUT). Default 1s, so an outage answers
	// 503 within about a second (a refused connection at once); 10s for the embedded Redis, which cannot
	// have a network outage but is slow under a stampede.
	RedisTimeout time.Duration
	// ShutdownTimeout bounds graceful shutdown (SECKILL_SHUTDOWN_TIMEOUT).
	// Default 15s.
	ShutdownTimeout time.Duration
	// RequestTimeout bounds each request's work (SECKILL_REQUEST_TIMEOUT).
	// Default 10s.
	RequestTimeout time.Duration
	// LogFormat is "json" or "text" (SECKILL_LOG_FORMAT). Default text
	// when both backends are embedded, json otherwise.
	LogFormat string
	// LogLevel is debug, info, warn or error (SECKILL_LOG_LEVEL). Default info.
	LogLevel string
	// RateUser limits orders per user, e.g. "10/s" or "600/m:20" (rate, then
	// an optional burst); "0" is off (SECKILL_RATE_USER). Default
	// DefaultRateUser with a real Redis, off with the embedded one.
	RateUser string
	// RateIP limits orders per client address, same syntax
	// (SECKILL_RATE_IP). Default "0" (off).
	RateIP string
	// UserJWTSecret, when set, makes orders take the user from an HS256
	// bearer token's "sub" (SECKILL_USER_JWT_SECRET). At least 32 bytes.
	UserJWTSecret string
	// AdminAddr puts the admin API, /metrics and pprof on a listener of
	// their own (SECKILL_ADMIN_ADDR). Empty: the main listener.
	AdminAddr string
	// Pprof serves /debug/pprof/ on the admin listener, behind the admin
	// token (SECKILL_PPROF). Requires AdminAddr. Default false.
	Pprof bool
	// Writers is how many lua-async writers this process runs
	// (SECKILL_WRITERS). Default 2. -1 runs none and leaves writing to
	// `seckill worker` processes (SECKILL_WRITERS=0), as go-redis uses -1
	// for "off" where 0 means the default; that needs a real Redis
	// (RedisURL), which the workers can reach.
	Writers int
	// WriterBatch is the most queued orders a writer persists in one
	// transaction (SECKILL_WRITER_BATCH). Default 500, at most 5000.
	WriterBatch int
	// ClaimIdle is how long a queued order may sit with a live writer that
	// stopped renewing its claim before another writer claims it
	// (SECKILL_CLAIM_IDLE): the backstop; a crashed writer's orders are
	// taken over through its lease within about a second. Default 30s, at
	// least 5s.
	ClaimIdle time.Duration
	// MaxDeliveries is how many times a queued order is delivered to
	// writers before it goes to the dead-letter stream
	// (SECKILL_MAX_DELIVERIES). Default 5.
	MaxDeliveries int
	// AsyncDurability is what a lua-async 202 waits for
	// (SECKILL_ASYNC_DURABILITY): "memory" (queued in Redis memory) or
	// "fsync" (Redis fsyncs every write: appendonly yes, appendfsync
	// always; checked at start and while running). Default "memory".
	AsyncDurability string
	// CrashAfterCommit, when positive, kills the process (SIGKILL) right
	// after its n-th lua-async batch commits, before the batch is
	// acknowledged in Redis (SECKILL_TEST_CRASH_AFTER_COMMIT). A fault
	// injection point for crash tests; never set it in production.
	CrashAfterCommit int
	// PaymentTimeout is how long after its sale an order may be paid; an
	// unpaid order is then cancelled and its unit returned to stock
	// (SECKILL_PAYMENT_TIMEOUT). The command line's default is
	// DefaultPaymentTimeout; zero (as in a Config built in code) means
	// orders never expire.
	PaymentTimeout time.Duration
}

// DefaultPaymentTimeout is the payment deadline of an order unless
// SECKILL_PAYMENT_TIMEOUT says otherwise.
const DefaultPaymentTimeout = 15 * time.Minute

// DefaultRateUser lets a user place a burst of 10 orders and 10 a second
// after it: plenty for a person retrying (with idempotent replays), and far
// above the 2-per-user bursts of the load tests; a bot hammering one account
// gets 429s. It applies with a real Redis only: the embedded one runs Lua
// several times slower, a stampede on it already nears its timeouts, and a
// single process needs no shared budget.
const DefaultRateUser = "10/s"

// maxRequestTimeout keeps the request bound under the server's write timeout.
const maxRequestTimeout = time.Minute

// Defaults of the timeouts (see Config).
const (
	defaultRequestTimeout = 10 * time.Second
	defaultLockWait       = 5 * time.Second
	defaultDBTimeout      = time.Second
	defaultSQLiteTimeout  = 5 * time.Second
)

// timeouts resolves the request, lock wait and database write bounds,
// applying the defaults to the values left zero.
func (c *Config) timeouts() (request, lockWait, dbWrite time.Duration) {
	request, lockWait, dbWrite = c.RequestTimeout, c.LockWait, c.DBTimeout
	if request == 0 {
		request = defaultRequestTimeout
	}
	if lockWait == 0 {
		lockWait = min(defaultLockWait, request/2)
	}
	if dbWrite == 0 {
		dbWrite = defaultDBTimeout
		if c.MySQLDSN == "" {
			dbWrite = defaultSQLiteTimeout
		}
		dbWrite = min(dbWrite, request/2)
	}
	return request, lockWait, dbWrite
}

// parseLevel reads SECKILL_LOG_LEVEL; "" is info.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(s)); err != nil || (s != "debug" && s != "info" && s != "warn" && s != "error") {
		return 0, fmt.Errorf("SECKILL_LOG_LEVEL=%q: want debug, info, warn or error", s)
	}
	return l, nil
}

// setting binds one variable to its environment name, flag and help.
type setting struct {
	env, flag, help string
	str             *string
	dur             *time.Duration
	boolean         *bool
	integer         *int
	def             string
}

func (c *Config) settings() []setting {
	return []setting{
		{env: "SECKILL_ADDR", flag: "addr", help: "listen address", str: &c.Addr, def: ":8080"},
		{env: "SECKILL_REDIS_URL", flag: "redis-url", help: "redis://host:port/db; empty = embedded in-process Redis", str: &c.RedisURL},
		{env: "SECKILL_MYSQL_DSN", flag: "mysql-dsn", help: "MySQL DSN, e.g. root@tcp(127.0.0.1:3306)/seckill?parseTime=true; empty = embedded SQLite", str: &c.MySQLDSN},
		{env: "SECKILL_SQLITE_PATH", flag: "sqlite-path", help: "embedded SQLite file", str: &c.SQLitePath, def: "seckill.db"},
		{env: "SECKILL_ADMIN_TOKEN", flag: "admin-token", help: "admin bearer token; required with MySQL, generated when embedded", str: &c.AdminToken},
		{env: "SECKILL_STRATEGY", flag: "strategy", help: "default strategy of new items: lua, lock or lua-async", str: &c.Strategy, def: "lua"},
		{env: "SECKILL_KEY_PREFIX", flag: "key-prefix", help: "prefix of every Redis key", str: &c.KeyPrefix, def: "seckill"},
		{env: "SECKILL_LOCK_WAIT", flag: "lock-wait", help: "how long a lock-strategy order waits for the item lock, under the request timeout; 0 = 5s or half the request timeout if less", dur: &c.LockWait, def: "0s"},
		{env: "SECKILL_DB_TIMEOUT", flag: "db-timeout", help: "bound on each statement of a lua or lock order transaction, under the request timeout; 0 = 1s (5s with embedded SQLite) or half the request timeout if less", dur: &c.DBTimeout, def: "0s"},
		{env: "SECKILL_REDIS_TIMEOUT", flag: "redis-timeout", help: "bound on each Redis call; 0 = 1s (10s embedded)", dur: &c.RedisTimeout, def: "0s"},
		{env: "SECKILL_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", help: "bound on graceful shutdown", dur: &c.ShutdownTimeout, def: "15s"},
		{env: "SECKILL_REQUEST_TIMEOUT", flag: "request-timeout", help: "bound on each request's work", dur: &c.RequestTimeout, def: "10s"},
		{env: "SECKILL_LOG_FORMAT", flag: "log-format", help: "json or text; empty = text when embedded, json otherwise", str: &c.LogFormat},
		{env: "SECKILL_LOG_LEVEL", flag: "log-level", help: "debug, info, warn or error", str: &c.LogLevel, def: "info"},
		{env: "SECKILL_RATE_USER", flag: "rate-user", help: "orders per user, N/s, N/m or N/h with optional :burst; 0 = off; empty = " + DefaultRateUser + " with a real Redis, off when embedded", str: &c.RateUser},
		{env: "SECKILL_RATE_IP", flag: "rate-ip", help: "orders per client address, same syntax; 0 = off", str: &c.RateIP, def: "0"},
		{env: "SECKILL_USER_JWT_SECRET", flag: "user-jwt-secret", help: "HS256 secret of user tokens (at least 32 bytes); set = orders need a bearer token whose sub is the user", str: &c.UserJWTSecret},
		{env: "SECKILL_ADMIN_ADDR", flag: "admin-addr", help: "separate listen address of the admin API, /metrics and pprof; empty = the main listener", str: &c.AdminAddr},
		{env: "SECKILL_PPROF", flag: "pprof", help: "serve /debug/pprof/ on the admin listener (needs SECKILL_ADMIN_ADDR)", boolean: &c.Pprof, def: "false"},
		{env: "SECKILL_WRITERS", flag: "writers", help: "lua-async writers in this process; 0 = leave writing to seckill worker", integer: &c.Writers, def: "2"},
		{env: "SECKILL_WRITER_BATCH", flag: "writer-batch", help: "most queued orders a writer persists in one transaction", integer: &c.WriterBatch, def: "500"},
		{env: "SECKILL_CLAIM_IDLE", flag: "claim-idle", help: "backstop: how long a queued order may sit with a live writer that stopped renewing its claim before another claims it (at least 5s; a crashed writer is taken over through its lease)", dur: &c.ClaimIdle, def: "30s"},
		{env: "SECKILL_ASYNC_DURABILITY", flag: "async-durability", help: "what a lua-async 202 waits for: memory, or fsync (needs Redis with appendonly yes and appendfsync always)", str: &c.AsyncDurability, def: "memory"},
		{env: "SECKILL_TEST_CRASH_AFTER_COMMIT", flag: "test-crash-after-commit", help: "fault injection for tests: SIGKILL this process after its n-th lua-async batch commits, before XACK; 0 = never", integer: &c.CrashAfterCommit, def: "0"},
		{env: "SECKILL_MAX_DELIVERIES", flag: "max-deliveries", help: "deliveries of a queued order before it goes to the dead-letter stream", integer: &c.MaxDeliveries, def: "5"},
		{env: "SECKILL_PAYMENT_TIMEOUT", flag: "payment-timeout", help: "how long an order may stay unpaid before it is cancelled and its unit returned; 0 = never", dur: &c.PaymentTimeout, def: DefaultPaymentTimeout.String()},
	}
}

// ParseConfig reads the environment, then flags (which win), and validates
// the result. Every bad value is reported, one line each.
func ParseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	var c Config
	var problems []error
	for _, s := range c.settings() {
		val := s.def
		if v := getenv(s.env); v != "" {
			val = v
		}
		help := fmt.Sprintf("%s (env %s)", s.help, s.env)
		switch {
		case s.str != nil:
			fs.StringVar(s.str, s.flag, val, help)
		case s.dur != nil:
			d, err := time.ParseDuration(val)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s=%q: not a duration like 3s or 500ms", s.env, val))
			}
			fs.DurationVar(s.dur, s.flag, d, help)
		case s.boolean != nil:
			b, err := strconv.ParseBool(val)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s=%q: want true or false", s.env, val))
			}
			fs.BoolVar(s.boolean, s.flag, b, help)
		case s.integer != nil:
			n, err := strconv.Atoi(val)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s=%q: not an integer", s.env, val))
			}
			fs.IntVar(s.integer, s.flag, n, help)
		}
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Writers == 0 {
		c.Writers = -1 // SECKILL_WRITERS=0: none here
	}
	if len(problems) == 0 {
		problems = append(problems, c.Validate())
	}
	return c, errors.Join(problems...)
}

// minClaimIdle is the smallest SECKILL_CLAIM_IDLE: a writer renews its
// claim every quarter of it, so only a writer that could not reach Redis
// for seconds on end can lose its entries to the backstop, even on a busy
// machine.
const minClaimIdle = 5 * time.Second

// Validate checks the values against each other.
func (c *Config) Validate() error {
	var problems []error
	if c.Strategy != "" && c.Strategy != "lua" && c.Strategy != "lock" && c.Strategy != "lua-async" {
		problems = append(problems, fmt.Errorf("SECKILL_STRATEGY=%q: want lua, lock or lua-async", c.Strategy))
	}
	if c.MySQLDSN != "" && c.AdminToken == "" {
		problems = append(problems, errors.New("SECKILL_ADMIN_TOKEN is required when SECKILL_MYSQL_DSN is set (a real deployment must not run with a generated token)"))
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		problems = append(problems, errors.New("SECKILL_ADMIN_TOKEN must be at least 16 characters"))
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		problems = append(problems, fmt.Errorf("SECKILL_REDIS_URL=%q: want redis://host:port/db", c.RedisURL))
	}
	switch c.AsyncDurability {
	case "", "memory":
	case "fsync":
		if c.RedisURL == "" {
			problems = append(problems, errors.New("SECKILL_ASYNC_DURABILITY=fsync needs SECKILL_REDIS_URL: the embedded Redis keeps nothing on disk"))
		}
	default:
		problems = append(problems, fmt.Errorf("SECKILL_ASYNC_DURABILITY=%q: want memory or fsync", c.AsyncDurability))
	}
	if c.Writers < -1 || c.Writers > 64 {
		problems = append(problems, fmt.Errorf("SECKILL_WRITERS=%d: want 0 to 64", c.Writers))
	}
	if c.Writers == -1 && c.RedisURL == "" {
		// The queue would live in this process only, where no writer runs:
		// its 202s would stay pending and vanish at the next start.
		problems = append(problems, errors.New("SECKILL_WRITERS=0 needs SECKILL_REDIS_URL: the embedded Redis lives inside this process, "+
			"so only this process's writers can write its lua-async orders (seckill worker refuses the embedded Redis); "+
			"run at least one writer, or use a real Redis shared with seckill worker processes"))
	}
	if c.WriterBatch < 0 || c.WriterBatch > 5000 {
		problems = append(problems, fmt.Errorf("SECKILL_WRITER_BATCH=%d: want 1 to 5000 (0 = the default 500)", c.WriterBatch))
	}
	if c.MaxDeliveries < 0 || c.MaxDeliveries > 1000 {
		problems = append(problems, fmt.Errorf("SECKILL_MAX_DELIVERIES=%d: want 1 to 1000 (0 = the default 5)", c.MaxDeliveries))
	}
	if c.ClaimIdle != 0 && c.ClaimIdle < minClaimIdle {
		problems = append(problems, fmt.Errorf("SECKILL_CLAIM_IDLE=%s: at least %s (0 = the default 30s). It is only the backstop "+
			"that takes over orders a live writer stopped renewing (renewed every quarter of it); a crashed writer's orders are "+
			"taken over through its one-second lease whatever this is, so a smaller value would only risk orders bouncing "+
			"between writers during a database stall", c.ClaimIdle, minClaimIdle))
	}
	if c.LockWait < 0 || c.DBTimeout < 0 || c.ShutdownTimeout < 0 || c.RedisTimeout < 0 || c.RequestTimeout < 0 || c.ClaimIdle < 0 {
		problems = append(problems, errors.New("durations must not be negative"))
	}
	// An order must be able to finish its lock wait, and then its write,
	// within its request: a bound at or over the request timeout would
	// never apply (the request answers 503 first), so it is a mistake.
	request, _, _ := c.timeouts()
	if c.LockWait >= request {
		problems = append(problems, fmt.Errorf("SECKILL_LOCK_WAIT=%s: must be under SECKILL_REQUEST_TIMEOUT (%s), so a lock obtained late still leaves the order time to be written", c.LockWait, request))
	}
	if c.DBTimeout >= request {
		problems = append(problems, fmt.Errorf("SECKILL_DB_TIMEOUT=%s: must be under SECKILL_REQUEST_TIMEOUT (%s), so a stalled database answers 503 before the request's deadline", c.DBTimeout, request))
	}
	if c.PaymentTimeout < 0 {
		problems = append(problems, fmt.Errorf("SECKILL_PAYMENT_TIMEOUT=%s: must not be negative (0 = orders never expire)", c.PaymentTimeout))
	}
	if c.RequestTimeout > maxRequestTimeout {
		problems = append(problems, fmt.Errorf("SECKILL_REQUEST_TIMEOUT=%s: at most %s", c.RequestTimeout, maxRequestTimeout))
	}
	if c.LogFormat != "" && c.LogFormat != "json" && c.LogFormat != "text" {
		problems = append(problems, fmt.Errorf("SECKILL_LOG_FORMAT=%q: want json or text", c.LogFormat))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		problems = append(problems, err)
	}
	if _, err := ratelimit.Parse(c.RateUser); err != nil {
		problems = append(problems, fmt.Errorf("SECKILL_RATE_USER=%w", err))
	}
	if _, err := ratelimit.Parse(c.RateIP); err != nil {
		problems = append(problems, fmt.Errorf("SECKILL_RATE_IP=%w", err))
	}
	if c.UserJWTSecret != "" && len(c.UserJWTSecret) < 32 {
		problems = append(problems, errors.New("SECKILL_USER_JWT_SECRET must be at least 32 bytes"))
	}
	if c.AdminAddr != "" && c.AdminAddr == c.Addr {
		problems = append(problems, fmt.Errorf("SECKILL_ADMIN_ADDR=%q: must differ from SECKILL_ADDR", c.AdminAddr))
	}
	if c.Pprof && c.AdminAddr == "" {
		problems = append(problems, errors.New("SECKILL_PPROF=true needs SECKILL_ADMIN_ADDR: profiles are served on the admin listener only"))
	}
	return errors.Join(problems...)
}
