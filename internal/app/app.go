// Package app wires the service: it opens the backends a Config names
// (embedded or real), applies migrations, and serves the HTTP API.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/shop"
	"github.com/seckill/seckill/internal/stock/store"
)

var _ handler.Shop = (*shop.Service)(nil)

// App is one running service instance.
type App struct {
	cfg      Config
	log      *slog.Logger
	rdb      redis.UniversalClient
	miniRDB  *embedredis.Server
	db       *gorm.DB
	service  *shop.Service
	rooms    *rooms.Service
	handler  *handler.Handler
	userKeys *handler.UserKeys // nil unless SECKILL_USER_JWKS_URL
	metrics  *metrics.Metrics
	backends []string
	relay    *outbox.Relay
	nats     *outbox.JetStream // nil unless SECKILL_NATS_URL
}

// New opens the backends and builds the service. Close releases them.
func New(ctx context.Context, cfg Config, log *slog.Logger) (a *App, err error) {
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = slog.New(handler.WithRequestIDs(log.Handler()))
	if cfg.RateUser == "" && cfg.RedisURL != "" {
		cfg.RateUser = DefaultRateUser
	}
	rateUser, _ := ratelimit.Parse(cfg.RateUser) // validated above
	rateIP, _ := ratelimit.Parse(cfg.RateIP)
	if cfg.RoomRateIP == "" && cfg.RedisURL != "" {
		cfg.RoomRateIP = DefaultRoomRateIP
	}
	roomRateIP, _ := ratelimit.Parse(cfg.RoomRateIP)
	if cfg.SQLitePath == "" {
		cfg.SQLitePath = DefaultSQLitePath
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = randomToken()
	}
	a = &App{cfg: cfg, log: log, metrics: metrics.New(handler.ErrorCode)}
	built := a // "return nil, err" sets a to nil before this runs
	defer func() {
		if err != nil {
			_ = built.Close()
		}
	}()
	var desc string
	if a.rdb, a.miniRDB, desc, err = openRedis(ctx, cfg.RedisMode, cfg.RedisURL, cfg.RedisTimeout, log); err != nil {
		return nil, err
	}
	a.backends = append(a.backends, desc)
	if a.db, desc, _, err = database.Open(ctx, cfg.MySQLDSN, cfg.SQLitePath); err != nil {
		return nil, err
	}
	a.backends = append(a.backends, desc)
	a.metrics.WatchRedis(a.rdb)
	if sqlDB, err := a.db.DB(); err == nil {
		a.metrics.WatchDB(sqlDB)
	}
	reqTimeout, lockWait, dbTimeout := cfg.timeouts()
	st, err := store.New(a.db, &store.Options{PaymentTimeout: cfg.PaymentTimeout})
	if err != nil {
		return nil, err
	}
	rcfg := outbox.Config{Logger: log, Observer: a.metrics}
	if cfg.NATSURL != "" {
		// A server down at the start is retried by the relay: its events wait in the database.
		a.nats, err = outbox.Connect(ctx, cfg.NATSURL, outbox.StreamConfig{})
		if a.nats == nil {
			return nil, err
		}
		if err != nil {
			log.Warn("NATS: stream not ready; the relay retries", "err", err)
		}
		rcfg.Publisher = a.nats
	}
	a.relay = outbox.New(st, rcfg)
	a.relay.Start()
	a.service, err = shop.NewService(st, a.rdb, shop.Config{
		DefaultStrategy: stock.StrategyName(cfg.Strategy), KeyPrefix: cfg.KeyPrefix, LockWait: lockWait, Logger: log,
		RequestTimeout: reqTimeout, WriteTimeout: dbTimeout, RedisWait: a.redisTimeout(),
		LockObserver: a.metrics.LockObserver(), Orders: a.metrics,
		Queue: queue.Config{Writers: cfg.Writers, Batch: cfg.WriterBatch, ClaimIdle: cfg.ClaimIdle,
			MaxDeliveries: cfg.MaxDeliveries, Observer: a.metrics, AfterCommit: crashAfterCommit(os.Getenv),
			Durability: cfg.AsyncDurability},
		Lifecycle: a.metrics, MissingItemTTL: missingItemTTL(cfg.MissingItemTTL), Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	hcfg := handler.Config{AdminToken: cfg.AdminToken, Logger: log, RequestTimeout: reqTimeout,
		Metrics: a.metrics, SeparateAdmin: cfg.AdminAddr != "", Pprof: cfg.Pprof,
		UserLimit: ratelimit.New(a.rdb, prefix+":ratelimit:", rateUser, &ratelimit.Options{Timeout: a.redisTimeout(),
			FailedOpen: func() { a.metrics.RateLimitFailedOpen("user") }}),
		IPLimit: ratelimit.New(a.rdb, prefix+":ratelimit:", rateIP, &ratelimit.Options{Timeout: a.redisTimeout(),
			FailedOpen: func() { a.metrics.RateLimitFailedOpen("ip") }}),
		RoomIPLimit: ratelimit.New(a.rdb, prefix+":ratelimit:", roomRateIP, &ratelimit.Options{Timeout: a.redisTimeout(),
			FailedOpen: func() { a.metrics.RateLimitFailedOpen("ip") }})}
	if secrets := cfg.stripeSecrets(); secrets != nil {
		// The webhook's database work has the order writes' bound: a
		// stalled database answers 503 and the provider retries.
		hcfg.StripeWebhookSecrets, hcfg.Payments, hcfg.PaymentTimeout = secrets, a.service, dbTimeout
	}
	hcfg.Currency, hcfg.PaymentNow = cfg.currency(), cfg.Now
	if cfg.UserJWTSecret != "" {
		hcfg.UserJWTSecret = []byte(cfg.UserJWTSecret)
	}
	hcfg.UserJWTIssuer, hcfg.UserJWTAudience = cfg.UserJWTIssuer, cfg.UserJWTAudience
	if cfg.UserJWKSURL != "" {
		if u, _ := url.Parse(cfg.UserJWKSURL); u != nil && u.Scheme == "http" && !loopback(u.Hostname()) {
			log.Warn("SECKILL_USER_JWKS_URL is plain http to another host: whoever can alter the traffic can publish keys and sign any user's tokens; use https",
				"url", cfg.UserJWKSURL)
		}
		// The first read is bounded: a provider down at the start leaves
		// an empty set, read again every few seconds (see NewUserKeys).
		if a.userKeys, err = handler.NewUserKeys(handler.UserKeysConfig{URL: cfg.UserJWKSURL,
			Refresh: cfg.UserJWKSRefresh, Logger: log}); err != nil {
			return nil, err
		}
		hcfg.UserKeys = a.userKeys
	}
	key, err := roomKey(ctx, cfg, a.db, log)
	if err != nil {
		return nil, err
	}
	factor := 1.0
	if cfg.RoomPassFactor != "" {
		factor, _ = parsePassFactor(cfg.RoomPassFactor) // validated above
	}
	if a.rooms, err = rooms.New(ctx, a.db, a.rdb, a.service, st, rooms.Config{Key: key, KeyPrefix: prefix,
		PassFactor: factor, MaxTickets: int64(cfg.RoomMaxTickets), RedisTimeout: a.redisTimeout(), Logger: log, Observer: a.metrics}); err != nil {
		return nil, err
	}
	a.rooms.Start()
	hcfg.Rooms = a.rooms
	hcfg.RoomRedisBudget = a.redisTimeout()
	if cfg.RoomHumanVerifyURL != "" {
		hcfg.HumanCheck = handler.NewHumanCheck(handler.HumanCheckConfig{URL: cfg.RoomHumanVerifyURL,
			Secret: cfg.RoomHumanSecret, Refuse: cfg.RoomHumanAction != "log", Logger: log})
	}
	if cfg.RoomPoWBits > 0 {
		if hcfg.RoomChallenge, hcfg.RoomPoW, err = roomPoW(key, cfg.RoomPoWBits, log); err != nil {
			return nil, err
		}
	}
	// /readyz is public: its checks are cached (see readinessCache), with
	// the handler's default bound on one check.
	readyTTL := cfg.ReadyzTTL
	if readyTTL == 0 {
		readyTTL = DefaultReadyzTTL
	}
	shop := readyShop{Service: a.service, ready: newReadinessCache(a.service, readyTTL, time.Second)}
	hcfg.Events, hcfg.EventsTimeout = st, dbTimeout
	a.handler = handler.New(shop, hcfg)
	return a, nil
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// missingItemTTL is SECKILL_MISSING_ITEM_TTL as shop reads it: there zero
// means its default and a negative value off; here zero is off.
func missingItemTTL(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler is the HTTP API.
func (a *App) Handler() http.Handler { return a.handler }

// AdminHandler is the admin listener's handler, or nil when the admin API is
// on the main one (AdminAddr empty).
func (a *App) AdminHandler() http.Handler { return a.handler.Admin() }

// AdminToken is the admin bearer token in force (configured or generated).
func (a *App) AdminToken() string { return a.cfg.AdminToken }

// Backends describes the Redis and database in use, for the start banner.
func (a *App) Backends() []string { return a.backends }

// Serve answers on l (and the admin API on admin, when AdminAddr is set)
// until ctx ends or a server fails, then shuts both down gracefully: they
// stop accepting, in-flight requests finish within ShutdownTimeout, and
// Serve returns once both servers' goroutines have.
func (a *App) Serve(ctx context.Context, l, admin net.Listener) error {
	srvs := []*http.Server{a.server(a.handler)}
	ls := []net.Listener{l}
	if h := a.handler.Admin(); h != nil && admin != nil {
		srvs = append(srvs, a.server(h))
		ls = append(ls, admin)
	}
	errc := make(chan error, len(srvs))
	for i, srv := range srvs {
		go func() { errc <- srv.Serve(ls[i]) }()
	}
	var errs []error
	pending := len(srvs)
	select {
	case err := <-errc: // a server failed: stop the other too
		pending--
		errs = append(errs, err)
	case <-ctx.Done():
	}
	timeout := a.cfg.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, srv := range srvs {
		errs = append(errs, srv.Shutdown(sctx))
	}
	for ; pending > 0; pending-- {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// server bounds each connection. Every request's work is bounded by the
// request timeout and answered by then (a 503 when it cannot finish), so
// the write timeout, which counts from the end of the request's headers
// and would cut the connection without an answer, sits well past it: the
// handler always answers first.
func (a *App) server(h http.Handler) *http.Server {
	reqTimeout, _, _ := a.cfg.timeouts()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      max(20*time.Second, reqTimeout+10*time.Second),
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// Close releases the backends. It is safe on a partly built App. With the
// embedded Redis, the lua-async writers first write every queued order
// (within ShutdownTimeout): that queue closes with this process.
func (a *App) Close() error {
	var errs []error
	if a.userKeys != nil {
		a.userKeys.Close()
	}
	if a.rooms != nil {
		a.rooms.Close()
	}
	if a.service != nil {
		if a.miniRDB != nil {
			a.drainEmbedded()
		}
		a.service.Close()
	}
	if a.relay != nil {
		a.relay.Close()
	}
	if a.nats != nil {
		a.nats.Close()
	}
	if a.rdb != nil {
		errs = append(errs, a.rdb.Close())
	}
	if a.db != nil {
		if sqlDB, err := a.db.DB(); err == nil {
			errs = append(errs, sqlDB.Close())
		}
	}
	if a.miniRDB != nil {
		a.miniRDB.Close()
	}
	return errors.Join(errs...)
}

// drainEmbedded waits for the writers to empty the embedded Redis's
// lua-async queues, and says what is lost when they cannot.
func (a *App) drainEmbedded() {
	timeout := a.cfg.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := a.service.DrainQueues(ctx)
	if err != nil {
		a.log.Error("shutdown: lua-async orders still queued in the embedded Redis are lost with it; their buyers were answered 202",
			"queued", st.Queued, "err", err)
	}
	if st.DeadLetters > 0 {
		a.log.Error("shutdown: lua-async dead letters are lost with the embedded Redis; their orders stay unwritten",
			"dead_letters", st.DeadLetters)
	}
}

// addr is the configured listen address.
func (a *App) addr() string {
	if a.cfg.Addr == "" {
		return DefaultAddr
	}
	return a.cfg.Addr
}
