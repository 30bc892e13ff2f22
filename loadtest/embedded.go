package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app"
)

type embeddedOptions struct {
	MySQLDSN  string // empty = embedded SQLite in a temp dir
	RedisURL  string // empty = in-process miniredis
	KeyPrefix string // empty = "loadtest-<random>"
	Log       io.Writer
}

type embeddedService struct {
	BaseURL    string
	AdminToken string
	SQLitePath string // set when the service uses the embedded SQLite
	Describe   string
	close      func() error
}

func (s *embeddedService) Close() error { return s.close() }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startEmbedded starts the service in-process with app.New on a loopback
// port: by default miniredis and an SQLite file in a temp dir, or the given
// MySQL DSN / Redis URL. Close stops it, removes the temp dir and, on a real
// Redis, deletes the keys under the run's own prefix.
func startEmbedded(ctx context.Context, opts embeddedOptions) (*embeddedService, error) {
	dir, err := os.MkdirTemp("", "seckill-loadtest-*")
	if err != nil {
		return nil, err
	}
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = "loadtest-" + randHex(4)
	}
	cfg := app.Config{
		RedisURL:        opts.RedisURL,
		MySQLDSN:        opts.MySQLDSN,
		SQLitePath:      filepath.Join(dir, "seckill.db"),
		AdminToken:      randHex(16),
		KeyPrefix:       opts.KeyPrefix,
		ShutdownTimeout: 5 * time.Second,
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx, l, nil) }()
	svc := &embeddedService{
		BaseURL:    "http://" + l.Addr().String(),
		AdminToken: a.AdminToken(),
		Describe:   strings.Join(a.Backends(), ", ") + ", key prefix " + opts.KeyPrefix,
	}
	if opts.MySQLDSN == "" {
		svc.SQLitePath = cfg.SQLitePath
	}
	svc.close = func() error {
		stop()
		err := <-served
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		err = errors.Join(err, a.Close())
		if opts.RedisURL != "" {
			err = errors.Join(err, deleteKeys(opts.RedisURL, opts.KeyPrefix))
		}
		return errors.Join(err, os.RemoveAll(dir))
	}
	return svc, nil
}

// deleteKeys removes the keys this run created on a shared Redis (only under
// its own prefix; never a flush).
func deleteKeys(url, prefix string) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+":*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan %s:*: %w", prefix, err)
	}
	if len(batch) > 0 {
		return rdb.Unlink(ctx, batch...).Err()
	}
	return nil
}
