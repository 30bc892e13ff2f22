package app

// The settings table: every variable the service reads, with its flag,
// help and default, in one place (ParseConfig reads it; the flag help and
// the configuration table in docs/OPERATIONS.md are made from it).

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
)

// setting binds one variable to its environment name, flag and help.
type setting struct {
	env, flag, help string
	str             *string
	dur             *time.Duration
	boolean         *bool
	integer         *int
	// def is the flag's default, parsed like the variable's value.
	def string
	// doc is the default as the configuration table (docs/OPERATIONS.md) states it (Markdown), for a
	// default that is not simply def (computed, or absent); empty: `def`.
	doc string
}

// documented is the default as the README states it.
func (s setting) documented() string {
	if s.doc != "" {
		return s.doc
	}
	return "`" + s.def + "`"
}

// usage is the flag's help: what it means, its variable, and, when the
// flag package would not show it, its default.
func (s setting) usage() string {
	// No backquotes: the flag package takes a backquoted word for the
	// name of the flag's value.
	plain := func(s string) string { return strings.ReplaceAll(s, "`", "") }
	if s.doc == "" {
		return fmt.Sprintf("%s (env %s)", plain(s.help), s.env)
	}
	return fmt.Sprintf("%s (env %s; default: %s)", plain(s.help), s.env, plain(s.doc))
}

func (c *Config) settings() []setting {
	dur := shortDuration
	return []setting{
		{env: "SECKILL_ADDR", flag: "addr", help: "listen address", str: &c.Addr, def: DefaultAddr},
		{env: "SECKILL_REDIS_URL", flag: "redis-url", help: "`redis://host:port/db`; with `SECKILL_REDIS_MODE=cluster`, `redis://host1:port1?addr=host2:port2&addr=host3:port3`", str: &c.RedisURL,
			doc: "empty: embedded in-process Redis (miniredis) on loopback, with a random password made at start"},
		{env: "SECKILL_REDIS_MODE", flag: "redis-mode", help: "`single` (one Redis) or `cluster` (a Redis Cluster, whose nodes `SECKILL_REDIS_URL` names, " +
			"some or all; not with the embedded Redis)",
			str: &c.RedisMode, def: DefaultRedisMode},
		{env: "SECKILL_MYSQL_DSN", flag: "mysql-dsn", help: "go-sql-driver DSN, e.g. `root@tcp(127.0.0.1:3306)/seckill?parseTime=true`", str: &c.MySQLDSN,
			doc: "empty: embedded SQLite file"},
		{env: "SECKILL_SQLITE_PATH", flag: "sqlite-path", help: "the embedded SQLite file", str: &c.SQLitePath, def: DefaultSQLitePath},
		{env: "SECKILL_ADMIN_TOKEN", flag: "admin-token", help: "bearer token of the admin API, at least 16 characters", str: &c.AdminToken,
			doc: "required with MySQL; generated and printed when embedded"},
		{env: "SECKILL_STRATEGY", flag: "strategy", help: "strategy of items created without one: `lua`, `lock` or `lua-async`", str: &c.Strategy, def: DefaultStrategy},
		{env: "SECKILL_KEY_PREFIX", flag: "key-prefix", help: "prefix of every Redis key", str: &c.KeyPrefix, def: DefaultKeyPrefix},
		{env: "SECKILL_LOCK_WAIT", flag: "lock-wait", help: "how long a `lock` order waits for the item's lock before 503; must be under the request timeout", dur: &c.LockWait, def: "0s",
			doc: "`" + dur(DefaultLockWait) + "` (or half the request timeout if less)"},
		{env: "SECKILL_REDIS_TIMEOUT", flag: "redis-timeout", help: "bound on each Redis call and pool wait", dur: &c.RedisTimeout, def: "0s",
			doc: "`" + dur(DefaultRedisTimeout) + "` (`" + dur(DefaultEmbeddedRedisTimeout) + "` embedded)"},
		{env: "SECKILL_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", help: "bound on graceful shutdown (SIGINT/SIGTERM)", dur: &c.ShutdownTimeout, def: dur(DefaultShutdownTimeout)},
		{env: "SECKILL_REQUEST_TIMEOUT", flag: "request-timeout", help: "bound on each request's work (at most `" + dur(maxRequestTimeout) + "`); every order is answered within it, " +
			"a 503 `unavailable` when its work can't finish", dur: &c.RequestTimeout, def: dur(DefaultRequestTimeout)},
		{env: "SECKILL_DB_TIMEOUT", flag: "db-timeout", help: "bound on each step (statement, commit) of a `lua`/`lock` order's transaction, so a stalled database " +
			"answers 503 in about this long; must be under the request timeout", dur: &c.DBTimeout, def: "0s",
			doc: "`" + dur(DefaultDBTimeout) + "` (`" + dur(DefaultSQLiteDBTimeout) + "` with the embedded SQLite; or half the request timeout if less)"},
		{env: "SECKILL_LOG_FORMAT", flag: "log-format", help: "`json` or `text`", str: &c.LogFormat,
			doc: "`text` when both backends are embedded, `json` otherwise"},
		{env: "SECKILL_LOG_LEVEL", flag: "log-level", help: "`debug`, `info`, `warn` or `error` (`debug` logs every request)", str: &c.LogLevel, def: DefaultLogLevel},
		{env: "SECKILL_RATE_USER", flag: "rate-user", help: "orders per user: `N/s`, `N/m` or `N/h`, optionally `:burst` (e.g. `600/m:20`); `0` = off", str: &c.RateUser,
			doc: "`" + DefaultRateUser + "` (burst 10) with a real Redis; off with the embedded one"},
		{env: "SECKILL_RATE_IP", flag: "rate-ip", help: "orders per client address, same syntax", str: &c.RateIP, def: DefaultRateIP},
		{env: "SECKILL_MISSING_ITEM_TTL", flag: "missing-item-ttl", help: "how long an unknown item id is answered 404 from memory on the public item and order paths " +
			"(at most `" + dur(maxMissingItemTTL) + "`); an item created on another instance is 404 here at most this long; `0` = off",
			dur: &c.MissingItemTTL, def: dur(DefaultMissingItemTTL)},
		{env: "SECKILL_READYZ_TTL", flag: "readyz-ttl", help: "how long a `/readyz` check's answer is reused (at most `" + dur(maxReadyzTTL) + "`), so a flood of " +
			"the public `/readyz` costs one check a TTL; `0` = the default", dur: &c.ReadyzTTL, def: "0s", doc: "`" + dur(DefaultReadyzTTL) + "`"},
		{env: "SECKILL_USER_JWT_SECRET", flag: "user-jwt-secret", help: "HS256 secret of user tokens, at least 32 bytes; set = JWT mode; not with `SECKILL_USER_JWKS_URL`", str: &c.UserJWTSecret,
			doc: "empty: the body's `user_id` is trusted"},
		{env: "SECKILL_USER_JWKS_URL", flag: "user-jwks-url", help: "`http(s)://` address of an identity provider's JWKS: user tokens are its RS256, ES256 or EdDSA tokens; " +
			"set = JWT mode; not with `SECKILL_USER_JWT_SECRET`; needs `SECKILL_USER_JWT_ISSUER` and `SECKILL_USER_JWT_AUDIENCE`", str: &c.UserJWKSURL,
			doc: "empty: no identity provider"},
		{env: "SECKILL_USER_JWT_ISSUER", flag: "user-jwt-issuer", help: "the `iss` every user token must have (required with `SECKILL_USER_JWKS_URL`)", str: &c.UserJWTIssuer,
			doc: "empty: not checked"},
		{env: "SECKILL_USER_JWT_AUDIENCE", flag: "user-jwt-audience", help: "an `aud` every user token must name (required with `SECKILL_USER_JWKS_URL`)", str: &c.UserJWTAudience,
			doc: "empty: not checked"},
		{env: "SECKILL_USER_JWKS_REFRESH", flag: "user-jwks-refresh", help: fmt.Sprintf("how often the JWKS is read again (%s to %s); an unknown `kid` also reads it, "+
			"at most every %s", dur(minUserJWKSRefresh), dur(maxUserJWKSRefresh), dur(handler.DefaultUserKeysMinInterval)),
			dur: &c.UserJWKSRefresh, def: dur(DefaultUserJWKSRefresh)},
		{env: "SECKILL_ADMIN_ADDR", flag: "admin-addr", help: "separate listen address of the admin API, the console, `/metrics` and pprof", str: &c.AdminAddr,
			doc: "empty: the main listener"},
		{env: "SECKILL_PPROF", flag: "pprof", help: "serve `/debug/pprof/` on the admin listener, behind the admin token; needs `SECKILL_ADMIN_ADDR`", boolean: &c.Pprof, def: "false"},
		{env: "SECKILL_WRITERS", flag: "writers", help: "`lua-async` writers in this process; `0` leaves writing to `seckill worker` processes and needs `SECKILL_REDIS_URL`",
			integer: &c.Writers, def: fmt.Sprint(DefaultWriters)},
		{env: "SECKILL_WRITER_BATCH", flag: "writer-batch", help: fmt.Sprintf("most queued orders one writer persists in one transaction (1 to %d)", maxWriterBatch),
			integer: &c.WriterBatch, def: fmt.Sprint(DefaultWriterBatch)},
		{env: "SECKILL_CLAIM_IDLE", flag: "claim-idle", help: "backstop: how long a queued order may sit with a live writer that stopped renewing its claim " +
			"before another writer claims it; at least `" + dur(minClaimIdle) + "` (a crashed writer is taken over through its one-second lease)",
			dur: &c.ClaimIdle, def: dur(DefaultClaimIdle)},
		{env: "SECKILL_MAX_DELIVERIES", flag: "max-deliveries", help: "deliveries of a queued order before it goes to the item's dead-letter stream",
			integer: &c.MaxDeliveries, def: fmt.Sprint(DefaultMaxDeliveries)},
		{env: "SECKILL_ASYNC_DURABILITY", flag: "async-durability", help: "what a `lua-async` 202 waits for: `memory`, or `fsync` (needs Redis with " +
			"`appendonly yes` and `appendfsync always`)", str: &c.AsyncDurability, def: DefaultAsyncDurability},
		{env: "SECKILL_PAYMENT_TIMEOUT", flag: "payment-timeout", help: "how long an order may stay unpaid; then it is cancelled and its unit returned to stock; " +
			"`0` = orders never expire", dur: &c.PaymentTimeout, def: dur(DefaultPaymentTimeout)},
		{env: "SECKILL_STRIPE_WEBHOOK_SECRET", flag: "stripe-webhook-secret", help: "signing secret (`whsec_…`) of the Stripe webhook endpoint, " +
			"comma-separated during a rotation: payments come from `POST /api/v1/payments/stripe` and a buyer's `/pay` is refused (403 `payment_by_provider`)",
			str: &c.StripeWebhookSecret, doc: "empty: no provider; the buyer's `/pay` records the payment (the embedded demo)"},
		{env: "SECKILL_CURRENCY", flag: "currency", help: "ISO 4217 code prices are in: a webhook payment in another currency is rejected",
			str: &c.Currency, def: DefaultCurrency},
		{env: "SECKILL_NATS_URL", flag: "nats-url", help: "NATS server (JetStream) the order events are relayed to, stream `SECKILL_ORDERS`, " +
			"subjects `seckill.orders.<item_id>`; empty: events are only in the database", str: &c.NATSURL, doc: "empty"},
		{env: "SECKILL_ROOM_KEY", flag: "room-key", help: "signing key of the waiting rooms' passes and tickets, at least 32 bytes as hex or base64; " +
			"every instance must use the same", str: &c.RoomKey,
			doc: "empty: made once and kept in the database, shared by every instance on it"},
		{env: "SECKILL_ROOM_PASS_FACTOR", flag: "room-pass-factor", help: "a waiting room's admitted-and-unused passes are at most this times the remaining stock (0.1 to 100)",
			str: &c.RoomPassFactor, def: "1"},
		{env: "SECKILL_ROOM_POW_BITS", flag: "room-pow-bits", help: fmt.Sprintf("proof-of-work of joining a waiting room: leading zero bits "+
			"(0 to %d; each one doubles a browser's work, 16 is about a second) the page must find before it joins; `0` = off", room.MaxPoWBits),
			integer: &c.RoomPoWBits, def: fmt.Sprint(DefaultRoomPoWBits)},
		{env: "SECKILL_ROOM_MAX_TICKETS", flag: "room-max-tickets", help: fmt.Sprintf("most tickets one waiting room holds: a join past "+
			"min(this, max(%d, %d × the units left)) is 409 `room_full` (a user with a ticket gets it back); 1 to %d", rooms.MinRoomTickets, rooms.TicketsPerUnit, maxRoomMaxTickets),
			integer: &c.RoomMaxTickets, def: fmt.Sprint(rooms.DefaultMaxTickets)},
		{env: "SECKILL_ROOM_HUMAN_VERIFY_URL", flag: "room-human-verify-url", help: "a Turnstile/hCaptcha-style verify endpoint: every join must carry " +
			"`\"human\": {\"token\"}`, which the service posts there (with the secret and the client's address) before giving a place", str: &c.RoomHumanVerifyURL,
			doc: "empty: off"},
		{env: "SECKILL_ROOM_HUMAN_SECRET", flag: "room-human-secret", help: "the verify endpoint's secret key", str: &c.RoomHumanSecret,
			doc: "empty (required with the verify URL)"},
		{env: "SECKILL_ROOM_HUMAN_ACTION", flag: "room-human-action", help: "`refuse` (a failed check is 403 `human_check_failed`, a verifier that " +
			"cannot answer 503) or `log` (logged, and the join admitted)", str: &c.RoomHumanAction, def: "refuse"},
		{env: "SECKILL_ROOM_RATE_IP", flag: "room-rate-ip", help: "waiting-room joins per client address, same syntax as `SECKILL_RATE_USER`; `0` = off " +
			"(raise it when many buyers share an address, e.g. behind a carrier NAT)", str: &c.RoomRateIP,
			doc: "`" + DefaultRoomRateIP + "` (burst 20) with a real Redis; off with the embedded one"},
	}
}
