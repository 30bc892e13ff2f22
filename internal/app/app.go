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
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/stock"
)

// App is one running service instance.
type App struct {
	cfg      Config
	log      *slog.Logger
	rdb      redis.UniversalClient
	miniRDB  *embedredis.Server
	db       *gorm.DB
	service  *stock.Service
	handler  *handler.Handler
	backends []string
}

// New opens the backends and builds the service. Close releases them.
func New(ctx context.Context, cfg Config, log *slog.Logger) (a *App, err error) {
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SQLitePath == "" {
		cfg.SQLitePath = "seckill.db"
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = randomToken()
	}
	a = &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	var desc string
	if a.rdb, a.miniRDB, desc, err = openRedis(ctx, cfg.RedisURL, cfg.RedisTimeout); err != nil {
		return nil, err
	}
	a.backends = append(a.backends, desc)
	if a.db, desc, _, err = openDB(ctx, cfg.MySQLDSN, cfg.SQLitePath); err != nil {
		return nil, err
	}
	a.backends = append(a.backends, desc)
	a.service, err = stock.NewService(stock.NewStore(a.db), a.rdb, stock.Config{
		DefaultStrategy: cfg.Strategy, KeyPrefix: cfg.KeyPrefix, LockWait: cfg.LockWait, Logger: log})
	if err != nil {
		return nil, err
	}
	a.handler = handler.New(a.service, handler.Config{AdminToken: cfg.AdminToken, Logger: log})
	return a, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler is the HTTP API.
func (a *App) Handler() http.Handler { return a.handler }

// AdminToken is the admin bearer token in force (configured or generated).
func (a *App) AdminToken() string { return a.cfg.AdminToken }

// Backends describes the Redis and database in use, for the start banner.
func (a *App) Backends() []string { return a.backends }

// Service is the domain service, for tests and tools in this module.
func (a *App) Service() *stock.Service { return a.service }

// Serve answers on l until ctx ends, then shuts down gracefully: it stops
// accepting, lets in-flight requests finish within ShutdownTimeout, and
// returns.
func (a *App) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      20 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	timeout := a.cfg.ShutdownTimeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Close releases the backends. It is safe on a partly built App.
func (a *App) Close() error {
	var errs []error
	if a.service != nil {
		a.service.Close()
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

// addr is the configured listen address.
func (a *App) addr() string {
	if a.cfg.Addr == "" {
		return ":8080"
	}
	return a.cfg.Addr
}
