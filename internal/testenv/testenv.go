// Package testenv gives each test its own backends: an embedded pair
// (miniredis and an SQLite file) and a real pair (a fresh MariaDB database
// and a Redis key prefix of its own on the machine's Redis). Under CI=true a
// missing real service fails the test; elsewhere it skips with the reason.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/embedredis"
)

// Backend names the Redis and database one test uses.
type Backend struct {
	Name       string
	RedisURL   string
	MySQLDSN   string // empty: SQLitePath
	SQLitePath string
	KeyPrefix  string
	// Mini is the embedded Redis, nil for the real one.
	Mini *embedredis.Server
}

// Defaults for the real services, overridable by environment.
func mysqlBase() string {
	if v := os.Getenv("SECKILL_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

func redisURL() string {
	if v := os.Getenv("SECKILL_TEST_REDIS_URL"); v != "" {
		return v
	}
	return "redis://127.0.0.1:6379/0"
}

// InCI reports whether tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// ForEach runs fn as a subtest on every backend: "embedded" and "mariadb".
func ForEach(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded(t)) })
	t.Run("mariadb", func(t *testing.T) { fn(t, Real(t)) })
}

// Embedded starts a miniredis and names an SQLite file in a temp dir.
func Embedded(t testing.TB) Backend {
	t.Helper()
	m, err := embedredis.Start()
	if err != nil {
		t.Fatalf("start miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	return Backend{Name: "embedded", RedisURL: m.URL(),
		SQLitePath: filepath.Join(t.TempDir(), "seckill.db"), KeyPrefix: "t" + Suffix(), Mini: m}
}

// Real creates a fresh MariaDB database and a Redis key prefix, and removes
// both when the test ends. It never flushes the shared Redis.
func Real(t testing.TB) Backend {
	t.Helper()
	b, _ := openReal(t, func(what string, err error) {
		t.Helper()
		t.Skipf("%s unavailable (set CI=true to make this fail): %v", what, err)
	})
	return b
}

// All is every backend a test can have: the embedded pair, and the real
// pair when its services answer. Outside CI a missing service is logged and
// its pair left out, rather than skipping t (for fuzz targets, whose
// embedded run should not be lost); under CI=true it fails t.
func All(t testing.TB) []Backend {
	t.Helper()
	all := []Backend{Embedded(t)}
	if b, ok := openReal(t, func(what string, err error) {
		t.Helper()
		t.Logf("%s unavailable, only the embedded backend is used (set CI=true to make this fail): %v", what, err)
	}); ok {
		all = append(all, b)
	}
	return all
}

// openReal is Real with what to do when a service is missing outside CI; ok is
// false when unavailable returned.
func openReal(t testing.TB, unavailable func(what string, err error)) (_ Backend, ok bool) {
	t.Helper()
	missing := func(what string, err error) {
		t.Helper()
		if InCI() {
			t.Fatalf("CI=true but %s is unavailable: %v", what, err)
		}
		unavailable(what, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatalf("SECKILL_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		missing("Redis at "+opt.Addr, err)
		return Backend{}, false
	}
	prefix := "seckilltest-" + Suffix()
	t.Cleanup(func() {
		defer rdb.Close()
		DeleteKeys(t, rdb, prefix+":*")
		DeleteKeys(t, rdb, "rate:"+prefix+":*") // the rate limiter's (redis_rate adds "rate:")
	})

	base, err := gomysql.ParseDSN(mysqlBase())
	if err != nil {
		t.Fatalf("SECKILL_TEST_MYSQL_DSN: %v", err)
	}
	base.DBName = ""
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		t.Fatalf("open mariadb: %v", err)
	}
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		missing("MariaDB at "+base.Addr, err)
		return Backend{}, false
	}
	name := "seckill_t_" + Suffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsn := *base
	dsn.DBName = name
	dsn.ParseTime = true
	return Backend{Name: "mariadb", RedisURL: redisURL(), MySQLDSN: dsn.FormatDSN(), KeyPrefix: prefix}, true
}

// DeleteKeys removes the keys matching pattern, and only those.
func DeleteKeys(t testing.TB, rdb *redis.Client, pattern string) {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, pattern, 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("clean redis keys %s: %v", pattern, err)
	}
}

// Suffix is a short random name part.
func Suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DB opens the backend's database as the service does, with the schema
// applied.
func (b Backend) DB(t testing.TB) *gorm.DB {
	t.Helper()
	db, _, _, err := database.Open(context.Background(), b.MySQLDSN, b.SQLitePath)
	if err != nil {
		t.Fatalf("open %s database: %v", b.Name, err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db
}

// Redis opens a client to the backend's Redis.
func (b Backend) Redis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatalf("redis url: %v", err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
