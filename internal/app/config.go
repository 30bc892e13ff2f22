package app

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
)

// Config is everything the service reads at start. Zero values mean the
// defaults documented on each field.
type Config struct {
	// Addr is the listen address (SECKILL_ADDR). Default ":8080".
	Addr string
	// RedisURL is redis://host:port/db (SECKILL_REDIS_URL), or with
	// RedisMode "cluster" go-redis's cluster URL,
	// redis://host1:port1?addr=host2:port2&addr=host3:port3. Empty: an
	// embedded in-process Redis (miniredis).
	RedisURL string
	// RedisMode is "single" (one Redis, or a primary behind one address)
	// or "cluster" (a Redis Cluster; RedisURL names some of its nodes)
	// (SECKILL_REDIS_MODE). Default "single".
	RedisMode string
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
	// have a network outage but is slow under a stampede. It also bounds
	// an order's wait for its call through the gate's pipeline once sent
	// (shop.Config.RedisWait), so a Redis Cluster master that
	// stops answering fails its own items' orders in about this long.
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
	// MissingItemTTL is how long an item id the database said does not
	// exist is answered 404 from memory on the public paths (an item's
	// page, its orders), so unknown ids cost no database read each
	// (SECKILL_MISSING_ITEM_TTL). An item created on another instance is
	// 404 here at most this long. The command line's default is
	// DefaultMissingItemTTL; zero (as in a Config built in code) is off.
	MissingItemTTL time.Duration
	// ReadyzTTL is how long a /readyz check's answer is reused
	// (SECKILL_READYZ_TTL): a flood of the public /readyz costs one check
	// (a Redis PING per master, a database ping) a TTL at most. Default
	// DefaultReadyzTTL; zero (as in a Config built in code) is the default.
	ReadyzTTL time.Duration
	// UserJWTSecret, when set, makes orders take the user from an HS256
	// bearer token's "sub" (SECKILL_USER_JWT_SECRET). At least 32 bytes.
	UserJWTSecret string
	// UserJWKSURL, when set, makes orders take the user from a bearer
	// token an identity provider signed (RS256, ES256 or EdDSA) with a key
	// of the JWKS at this http(s) address (SECKILL_USER_JWKS_URL). Not with
	// UserJWTSecret; needs UserJWTIssuer and UserJWTAudience.
	UserJWKSURL string
	// UserJWTIssuer and UserJWTAudience are the "iss" a user token must
	// have and an "aud" it must name (SECKILL_USER_JWT_ISSUER,
	// SECKILL_USER_JWT_AUDIENCE): required with UserJWKSURL, optional with
	// UserJWTSecret.
	UserJWTIssuer, UserJWTAudience string
	// UserJWKSRefresh is how often the JWKS is read again
	// (SECKILL_USER_JWKS_REFRESH). The command line's default is
	// DefaultUserJWKSRefresh; zero (as in a Config built in code) is the
	// default too.
	UserJWKSRefresh time.Duration
	// AdminAddr puts the admin API, /metrics and pprof on a listener of
	// their own (SECKILL_ADMIN_ADDR). Empty: the main listener.
	AdminAddr string
	// Pprof serves /debug/pprof/ on the admin listener, behind the admin
	// token (SECKILL_PPROF). Requires AdminAddr. Default false.
	Pprof bool
	// Writers is how many lua-async writers this process runs, with the
	// meaning of queue.Config.Writers: 0 is the default (2) and
	// queue.NoWriters (-1) runs none, leaving writing to `seckill worker`
	// processes, which needs a real Redis (RedisURL) they can reach. On the
	// command line SECKILL_WRITERS=0 means none: ParseConfig turns it into
	// queue.NoWriters, the one place the two spellings meet.
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
	// PaymentTimeout is how long after its sale an order may be paid; an
	// unpaid order is then cancelled and its unit returned to stock
	// (SECKILL_PAYMENT_TIMEOUT). The command line's default is
	// DefaultPaymentTimeout; zero (as in a Config built in code) means
	// orders never expire.
	PaymentTimeout time.Duration
	// StripeWebhookSecret is the signing secret of the Stripe webhook
	// endpoint, several comma-separated during a rotation
	// (SECKILL_STRIPE_WEBHOOK_SECRET). Set: payments come from POST
	// /api/v1/payments/stripe and a buyer's /pay is refused. Empty: the
	// buyer's /pay records the payment (the embedded demo).
	StripeWebhookSecret string
	// Currency is the ISO code prices are in, which a payment must be in
	// (SECKILL_CURRENCY). Default DefaultCurrency.
	Currency string
	// NATSURL is the NATS server the outbox relay publishes order events
	// to (SECKILL_NATS_URL); empty: the relay only marks them.
	NATSURL string
	// RoomKey signs the waiting rooms' passes and tickets (SECKILL_ROOM_KEY):
	// 32+ bytes as hex or base64. Empty: a key made once and kept in the
	// database (table service_secrets), so every instance on the database
	// shares it and passes outlive restarts.
	RoomKey string
	// RoomPassFactor caps a room's admitted-and-unused passes at this
	// times the remaining stock (SECKILL_ROOM_PASS_FACTOR). Default 1.
	RoomPassFactor string
	// RoomPoWBits turns on the proof-of-work of joining a waiting room:
	// a join must show a nonce whose SHA-256 with a signed challenge has
	// this many leading zero bits, 0 to room.MaxPoWBits
	// (SECKILL_ROOM_POW_BITS). Default 0, off.
	RoomPoWBits int
	// Now is the clock that judges orders' payment deadlines (no variable:
	// tests set one they move, instead of waiting for a short real
	// timeout). Default time.Now.
	Now func() time.Time
	// RoomRateIP limits waiting-room joins per client address, same
	// syntax as RateUser (SECKILL_ROOM_RATE_IP). Default "":
	// DefaultRoomRateIP with a real Redis, off with the embedded one.
	RoomRateIP string
	// RoomMaxTickets bounds one room's tickets (SECKILL_ROOM_MAX_TICKETS):
	// a room holds min(this, max(1000, 50 × the units left)). 0: the
	// default, rooms.DefaultMaxTickets.
	RoomMaxTickets int
	// RoomHumanVerifyURL, RoomHumanSecret and RoomHumanAction set up the
	// human check of joins (SECKILL_ROOM_HUMAN_VERIFY_URL, _SECRET,
	// _ACTION refuse|log). Default "": off.
	RoomHumanVerifyURL, RoomHumanSecret, RoomHumanAction string
}

// timeouts resolves the request, lock wait and database write bounds,
// applying the defaults to the values left zero.
func (c *Config) timeouts() (request, lockWait, dbWrite time.Duration) {
	request, lockWait, dbWrite = c.RequestTimeout, c.LockWait, c.DBTimeout
	if request == 0 {
		request = DefaultRequestTimeout
	}
	if lockWait == 0 {
		lockWait = min(DefaultLockWait, request/2)
	}
	if dbWrite == 0 {
		dbWrite = DefaultDBTimeout
		if c.MySQLDSN == "" {
			dbWrite = DefaultSQLiteDBTimeout
		}
		dbWrite = min(dbWrite, request/2)
	}
	return request, lockWait, dbWrite
}

// validateUserJWKS checks the identity provider's settings.
func (c *Config) validateUserJWKS() []error {
	var problems []error
	if c.UserJWKSURL != "" {
		if u, err := url.Parse(c.UserJWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("SECKILL_USER_JWKS_URL=%q: want an http:// or https:// address of the identity provider's JWKS", c.UserJWKSURL))
		}
		if c.UserJWTSecret != "" {
			// One issuer of user ids: whoever holds the secret could
			// otherwise sign any of the provider's users.
			problems = append(problems, errors.New("SECKILL_USER_JWT_SECRET and SECKILL_USER_JWKS_URL are both set: choose one source of user tokens"))
		}
		// A provider's keys sign the tokens of all its applications and
		// users: only iss and aud say a token is for this service.
		if c.UserJWTIssuer == "" {
			problems = append(problems, errors.New("SECKILL_USER_JWKS_URL needs SECKILL_USER_JWT_ISSUER, the iss of the provider's tokens"))
		}
		if c.UserJWTAudience == "" {
			problems = append(problems, errors.New("SECKILL_USER_JWKS_URL needs SECKILL_USER_JWT_AUDIENCE, the aud the provider puts in this service's tokens"))
		}
	} else if c.UserJWTSecret == "" && (c.UserJWTIssuer != "" || c.UserJWTAudience != "") {
		problems = append(problems, errors.New("SECKILL_USER_JWT_ISSUER and SECKILL_USER_JWT_AUDIENCE check user tokens: "+
			"set SECKILL_USER_JWKS_URL or SECKILL_USER_JWT_SECRET too"))
	}
	if c.UserJWKSRefresh != 0 && (c.UserJWKSRefresh < minUserJWKSRefresh || c.UserJWKSRefresh > maxUserJWKSRefresh) {
		problems = append(problems, fmt.Errorf("SECKILL_USER_JWKS_REFRESH=%s: want %s to %s", c.UserJWKSRefresh, minUserJWKSRefresh, maxUserJWKSRefresh))
	}
	return problems
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
		help := s.usage()
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
		c.Writers = queue.NoWriters // SECKILL_WRITERS=0: none here
	}
	if len(problems) == 0 {
		problems = append(problems, c.Validate())
	}
	return c, errors.Join(problems...)
}

// Validate checks the values against each other.
func (c *Config) Validate() error {
	var problems []error
	if c.Strategy != "" && !stock.StrategyName(c.Strategy).Valid() {
		problems = append(problems, fmt.Errorf("SECKILL_STRATEGY=%q: want one of %v", c.Strategy, stock.Strategies))
	}
	if c.MySQLDSN != "" && c.AdminToken == "" {
		problems = append(problems, errors.New("SECKILL_ADMIN_TOKEN is required when SECKILL_MYSQL_DSN is set (a real deployment must not run with a generated token)"))
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		problems = append(problems, errors.New("SECKILL_ADMIN_TOKEN must be at least 16 characters"))
	}
	switch c.RedisMode {
	case "", RedisModeSingle:
		if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
			problems = append(problems, fmt.Errorf("SECKILL_REDIS_URL=%q: want redis://host:port/db", c.RedisURL))
		}
	case RedisModeCluster:
		if c.RedisURL == "" {
			problems = append(problems, errors.New("SECKILL_REDIS_MODE=cluster needs SECKILL_REDIS_URL naming the cluster's nodes, "+
				"e.g. redis://127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003: the embedded Redis is a single server"))
		} else if err := checkClusterURL(c.RedisURL); err != nil {
			problems = append(problems, err)
		}
	default:
		problems = append(problems, fmt.Errorf("SECKILL_REDIS_MODE=%q: want single or cluster", c.RedisMode))
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
	if c.Writers < queue.NoWriters || c.Writers > maxWriters {
		problems = append(problems, fmt.Errorf("SECKILL_WRITERS=%d: want 0 to %d", c.Writers, maxWriters))
	}
	if c.Writers == queue.NoWriters && c.RedisURL == "" {
		// The queue would live in this process only, where no writer runs:
		// its 202s would stay pending and vanish at the next start.
		problems = append(problems, errors.New("SECKILL_WRITERS=0 needs SECKILL_REDIS_URL: the embedded Redis lives inside this process, "+
			"so only this process's writers can write its lua-async orders (seckill worker refuses the embedded Redis); "+
			"run at least one writer, or use a real Redis shared with seckill worker processes"))
	}
	if c.WriterBatch < 0 || c.WriterBatch > maxWriterBatch {
		problems = append(problems, fmt.Errorf("SECKILL_WRITER_BATCH=%d: want 1 to %d (0 = the default %d)", c.WriterBatch, maxWriterBatch, DefaultWriterBatch))
	}
	if c.MaxDeliveries < 0 || c.MaxDeliveries > maxMaxDeliveries {
		problems = append(problems, fmt.Errorf("SECKILL_MAX_DELIVERIES=%d: want 1 to %d (0 = the default %d)", c.MaxDeliveries, maxMaxDeliveries, DefaultMaxDeliveries))
	}
	if c.ClaimIdle != 0 && c.ClaimIdle < minClaimIdle {
		problems = append(problems, fmt.Errorf("SECKILL_CLAIM_IDLE=%s: at least %s (0 = the default %s). It is only the backstop "+
			"that takes over orders a live writer stopped renewing (renewed every quarter of it); a crashed writer's orders are "+
			"taken over through its one-second lease whatever this is, so a smaller value would only risk orders bouncing "+
			"between writers during a database stall", c.ClaimIdle, minClaimIdle, DefaultClaimIdle))
	}
	if c.RoomKey != "" {
		if _, err := parseRoomKey(c.RoomKey); err != nil {
			problems = append(problems, fmt.Errorf("SECKILL_ROOM_KEY: %w", err))
		}
	}
	if c.RoomPassFactor != "" {
		if _, err := parsePassFactor(c.RoomPassFactor); err != nil {
			problems = append(problems, fmt.Errorf("SECKILL_ROOM_PASS_FACTOR=%q: %w", c.RoomPassFactor, err))
		}
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
	if c.MissingItemTTL < 0 || c.MissingItemTTL > maxMissingItemTTL {
		problems = append(problems, fmt.Errorf("SECKILL_MISSING_ITEM_TTL=%s: must be from 0 (off) to %s", c.MissingItemTTL, maxMissingItemTTL))
	}
	if c.ReadyzTTL < 0 || c.ReadyzTTL > maxReadyzTTL {
		problems = append(problems, fmt.Errorf("SECKILL_READYZ_TTL=%s: must be from 0 (the default, %s) to %s", c.ReadyzTTL, DefaultReadyzTTL, maxReadyzTTL))
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
	if c.RoomHumanVerifyURL != "" {
		if u, err := url.Parse(c.RoomHumanVerifyURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			problems = append(problems, fmt.Errorf("SECKILL_ROOM_HUMAN_VERIFY_URL=%q: want an http(s) URL", c.RoomHumanVerifyURL))
		}
		if c.RoomHumanSecret == "" {
			problems = append(problems, errors.New("SECKILL_ROOM_HUMAN_VERIFY_URL needs SECKILL_ROOM_HUMAN_SECRET"))
		}
	}
	if c.RoomHumanAction != "" && c.RoomHumanAction != "refuse" && c.RoomHumanAction != "log" {
		problems = append(problems, fmt.Errorf("SECKILL_ROOM_HUMAN_ACTION=%q: want refuse or log", c.RoomHumanAction))
	}
	if c.RoomMaxTickets < 0 || c.RoomMaxTickets > maxRoomMaxTickets {
		problems = append(problems, fmt.Errorf("SECKILL_ROOM_MAX_TICKETS=%d: want 1 to %d", c.RoomMaxTickets, maxRoomMaxTickets))
	}
	if _, err := ratelimit.Parse(c.RoomRateIP); err != nil {
		problems = append(problems, fmt.Errorf("SECKILL_ROOM_RATE_IP=%w", err))
	}
	if c.UserJWTSecret != "" && len(c.UserJWTSecret) < 32 {
		problems = append(problems, errors.New("SECKILL_USER_JWT_SECRET must be at least 32 bytes"))
	}
	problems = append(problems, c.validateUserJWKS()...)
	problems = append(problems, c.validatePayments()...)
	if c.AdminAddr != "" && c.AdminAddr == c.Addr {
		problems = append(problems, fmt.Errorf("SECKILL_ADMIN_ADDR=%q: must differ from SECKILL_ADDR", c.AdminAddr))
	}
	if c.RoomPoWBits < 0 || c.RoomPoWBits > room.MaxPoWBits {
		problems = append(problems, fmt.Errorf("SECKILL_ROOM_POW_BITS=%d: want 0 (off) to %d", c.RoomPoWBits, room.MaxPoWBits))
	}
	if c.Pprof && c.AdminAddr == "" {
		problems = append(problems, errors.New("SECKILL_PPROF=true needs SECKILL_ADMIN_ADDR: profiles are served on the admin listener only"))
	}
	return errors.Join(problems...)
}
