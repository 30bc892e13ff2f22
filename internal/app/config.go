package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
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
	// (SECKILL_LOCK_WAIT). Default 5s.
	LockWait time.Duration
	// RedisTimeout bounds each Redis call and the wait for a pooled
	// connection (SECKILL_REDIS_TIMEOUT). Default 1s, so an outage answers
	// 503 within about a second (a refused connection at once); 10s for the embedded Redis, which cannot
	// have a network outage but is slow under a stampede.
	RedisTimeout time.Duration
	// ShutdownTimeout bounds graceful shutdown (SECKILL_SHUTDOWN_TIMEOUT).
	// Default 15s.
	ShutdownTimeout time.Duration
}

// setting binds one variable to its environment name, flag and help.
type setting struct {
	env, flag, help string
	str             *string
	dur             *time.Duration
	def             string
}

func (c *Config) settings() []setting {
	return []setting{
		{env: "SECKILL_ADDR", flag: "addr", help: "listen address", str: &c.Addr, def: ":8080"},
		{env: "SECKILL_REDIS_URL", flag: "redis-url", help: "redis://host:port/db; empty = embedded in-process Redis", str: &c.RedisURL},
		{env: "SECKILL_MYSQL_DSN", flag: "mysql-dsn", help: "MySQL DSN, e.g. root@tcp(127.0.0.1:3306)/seckill?parseTime=true; empty = embedded SQLite", str: &c.MySQLDSN},
		{env: "SECKILL_SQLITE_PATH", flag: "sqlite-path", help: "embedded SQLite file", str: &c.SQLitePath, def: "seckill.db"},
		{env: "SECKILL_ADMIN_TOKEN", flag: "admin-token", help: "admin bearer token; required with MySQL, generated when embedded", str: &c.AdminToken},
		{env: "SECKILL_STRATEGY", flag: "strategy", help: "default strategy of new items: lua or lock", str: &c.Strategy, def: "lua"},
		{env: "SECKILL_KEY_PREFIX", flag: "key-prefix", help: "prefix of every Redis key", str: &c.KeyPrefix, def: "seckill"},
		{env: "SECKILL_LOCK_WAIT", flag: "lock-wait", help: "how long a lock-strategy order waits for the item lock", dur: &c.LockWait, def: "5s"},
		{env: "SECKILL_REDIS_TIMEOUT", flag: "redis-timeout", help: "bound on each Redis call; 0 = 1s (10s embedded)", dur: &c.RedisTimeout, def: "0s"},
		{env: "SECKILL_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", help: "bound on graceful shutdown", dur: &c.ShutdownTimeout, def: "15s"},
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
		}
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if len(problems) == 0 {
		problems = append(problems, c.Validate())
	}
	return c, errors.Join(problems...)
}

// Validate checks the values against each other.
func (c *Config) Validate() error {
	var problems []error
	if c.Strategy != "" && c.Strategy != "lua" && c.Strategy != "lock" {
		problems = append(problems, fmt.Errorf("SECKILL_STRATEGY=%q: want lua or lock", c.Strategy))
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
	if c.LockWait < 0 || c.ShutdownTimeout < 0 || c.RedisTimeout < 0 {
		problems = append(problems, errors.New("durations must not be negative"))
	}
	return errors.Join(problems...)
}
