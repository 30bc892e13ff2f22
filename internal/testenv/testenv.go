// Package testenv gives each test its own backends: an embedded pair
// (miniredis and an SQLite file), a real pair (a fresh MariaDB database and
// a Redis key prefix of its own on the machine's Redis) and a cluster pair
// (the same on the local Redis Cluster of scripts/redis-cluster.sh). Under
// CI=true a missing real service fails the test; elsewhere it skips with
// the reason.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	// RedisMode is the service's SECKILL_REDIS_MODE for RedisURL: "" (a
	// single Redis) or "cluster" (RedisURL is go-redis's cluster URL).
	RedisMode string
	// Mini is the embedded Redis, nil for the real one.
	Mini *embedredis.Server
}

// ModeCluster is Backend.RedisMode on a Redis Cluster.
const ModeCluster = "cluster"

// IsCluster reports whether the backend's Redis is a Redis Cluster.
func (b Backend) IsCluster() bool { return b.RedisMode == ModeCluster }

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

// DefaultClusterURL is the cluster scripts/redis-cluster.sh starts.
const DefaultClusterURL = "redis://127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003"

func clusterURL() string {
	if v := os.Getenv("SECKILL_TEST_REDIS_CLUSTER_URL"); v != "" {
		return v
	}
	return DefaultClusterURL
}

// InCI reports whether tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// ForEach runs fn as a subtest on every backend: "embedded" and "mariadb".
func ForEach(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded(t)) })
	t.Run("mariadb", func(t *testing.T) { fn(t, Real(t)) })
}

// ForEachParallel is ForEach with the two backends' subtests as parallel
// tests (t.Parallel): they start once the calling test's function has
// returned, and run beside the package's other parallel tests, within
// -test.parallel.
func ForEachParallel(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, n := range ForEachNames {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			fn(t, Open(t, n))
		})
	}
}

// EachParallel runs fn on every case as parallel subtests of t
// (t.Parallel), each named by name: within -test.parallel, beside the
// package's other parallel tests.
func EachParallel[C any](t *testing.T, cases []C, name func(C) string, fn func(t *testing.T, c C)) {
	t.Helper()
	for _, c := range cases {
		t.Run(name(c), func(t *testing.T) {
			t.Parallel()
			fn(t, c)
		})
	}
}

// ForEachNames are ForEach's backends, for tests that make cases of them.
var ForEachNames = []string{"embedded", "mariadb"}

// Open is the backend ForEach names n: Embedded for "embedded", else Real.
func Open(t *testing.T, n string) Backend {
	t.Helper()
	if n == "embedded" {
		return Embedded(t)
	}
	return Real(t)
}

// ForEachEmpty is ForEach with empty databases, for tests of what the
// migrations do to a new database (the others start with the schema: see
// schema.go).
func ForEachEmpty(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) { fn(t, embedded(t, false)) })
	t.Run("mariadb", func(t *testing.T) {
		b, _ := openReal(t, "", false, func(what string, err error) {
			t.Helper()
			t.Skipf("%s unavailable (set CI=true to make this fail): %v", what, err)
		})
		fn(t, b)
	})
}

// ForEachWithCluster is ForEach, then "cluster": the real pair with the
// local Redis Cluster for Redis (see Cluster). A test on it must reach
// Redis through Backend.Universal, which routes each key to its master.
func ForEachWithCluster(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	ForEach(t, fn)
	t.Run("cluster", func(t *testing.T) { fn(t, Cluster(t)) })
}

// Embedded starts a miniredis and names an SQLite file in a temp dir.
func Embedded(t testing.TB) Backend {
	t.Helper()
	return embedded(t, true)
}

// embedded is Embedded; schema: the file starts with the migrated schema.
func embedded(t testing.TB, schema bool) Backend {
	t.Helper()
	m, err := embedredis.Start()
	if err != nil {
		t.Fatalf("start miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	path := filepath.Join(t.TempDir(), "seckill.db")
	if err := writeSQLiteSchema(path, schema); err != nil {
		t.Fatalf("sqlite schema: %v", err)
	}
	return Backend{Name: "embedded", RedisURL: m.URL(),
		SQLitePath: path, KeyPrefix: "t" + Suffix(), Mini: m}
}

// Real creates a fresh MariaDB database and a Redis key prefix, and removes
// both when the test ends. It never flushes the shared Redis.
func Real(t testing.TB) Backend {
	t.Helper()
	b, _ := openReal(t, "", true, func(what string, err error) {
		t.Helper()
		t.Skipf("%s unavailable (set CI=true to make this fail): %v", what, err)
	})
	return b
}

// Cluster is Real on the local Redis Cluster (SECKILL_TEST_REDIS_CLUSTER_URL,
// default DefaultClusterURL: start it with scripts/redis-cluster.sh start):
// a fresh MariaDB database and a key prefix of its own, whose keys are
// removed from every master when the test ends. Nothing is flushed.
func Cluster(t testing.TB) Backend {
	t.Helper()
	b, _ := openReal(t, ModeCluster, true, func(what string, err error) {
		t.Helper()
		t.Skipf("%s unavailable (start it with scripts/redis-cluster.sh start; set CI=true to make this fail): %v", what, err)
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
	if b, ok := openReal(t, "", true, func(what string, err error) {
		t.Helper()
		t.Logf("%s unavailable, only the embedded backend is used (set CI=true to make this fail): %v", what, err)
	}); ok {
		all = append(all, b)
	}
	return all
}

// openReal is Real (mode "") or Cluster (ModeCluster) with what to do when
// a service is missing outside CI; ok is false when unavailable returned.
func openReal(t testing.TB, mode string, schema bool, unavailable func(what string, err error)) (_ Backend, ok bool) {
	t.Helper()
	missing := func(what string, err error) {
		t.Helper()
		if InCI() {
			t.Fatalf("CI=true but %s is unavailable: %v", what, err)
		}
		unavailable(what, err)
	}
	// Setup, not a check: parallel tests on a busy 2-core machine may
	// wait seconds for a CREATE DATABASE; a service that is down refuses
	// the connection at once.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	url, name := redisURL(), "mariadb"
	if mode == ModeCluster {
		url, name = clusterURL(), "cluster"
	}
	rdb, err := openUniversal(mode, url)
	if err != nil {
		t.Fatalf("test Redis URL %q: %v", url, err)
	}
	if err := redisAnswers(ctx, rdb); err != nil {
		_ = rdb.Close()
		what := "Redis at " + url
		if mode == ModeCluster {
			what = "Redis Cluster at " + url
		}
		missing(what, err)
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
	raiseConnLimit(ctx, t, admin)
	dbName := "seckill_t_" + Suffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+dbName+"`"); err != nil {
		t.Fatalf("create database %s: %v", dbName, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + dbName + "`"); err != nil {
			t.Errorf("drop database %s: %v", dbName, err)
		}
	})
	if err := cloneMySQLSchema(ctx, admin, *base, dbName, schema); err != nil {
		t.Fatalf("database %s: %v", dbName, err)
	}
	dsn := *base
	dsn.DBName = dbName
	dsn.ParseTime = true
	return Backend{Name: name, RedisURL: url, RedisMode: mode, MySQLDSN: dsn.FormatDSN(), KeyPrefix: prefix}, true
}

// minConnections is the max_connections the tests need of the test
// MariaDB: every service a test starts has a pool of up to 64
// connections, and the README's test command runs several packages at
// once (-p 4), each with parallel tests; MariaDB's default is 151.
const minConnections = 1000

var connLimitOnce sync.Once

// raiseConnLimit raises the test MariaDB's max_connections to at least
// minConnections, once a process (SET GLOBAL: until the server restarts).
// Without the privilege it says so and goes on: the tests may then see
// "Too many connections".
func raiseConnLimit(ctx context.Context, t testing.TB, admin *sql.DB) {
	connLimitOnce.Do(func() {
		q := fmt.Sprintf("SET GLOBAL max_connections = GREATEST(@@GLOBAL.max_connections, %d)", minConnections)
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Logf("could not raise the test MariaDB's max_connections to %d (%v): parallel packages may run out of connections", minConnections, err)
		}
	})
}

// openUniversal is a client of url: a ClusterClient in ModeCluster.
func openUniversal(mode, url string) (redis.UniversalClient, error) {
	if mode == ModeCluster {
		opt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, err
		}
		opt.ClusterStateReloadInterval = time.Second // as the service: see TestStartClusterWithReplicas
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}

// redisAnswers pings rdb: every master, and a cluster must be whole
// (cluster_state:ok), or a test would fail half its keys.
func redisAnswers(ctx context.Context, rdb redis.UniversalClient) error {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Ping(ctx).Err()
	}
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
}

// DeleteKeys removes the keys matching pattern, and only those: on a
// Redis Cluster, from every master (SCAN sees one node's keys only).
func DeleteKeys(t testing.TB, rdb redis.UniversalClient, pattern string) {
	t.Helper()
	ctx := context.Background()
	del := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			// One key a DEL: keys of several slots in one DEL are CROSSSLOT.
			node.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return del(ctx, m) })
	} else {
		err = del(ctx, rdb)
	}
	if err != nil {
		t.Logf("clean redis keys %s: %v", pattern, err)
	}
}

// Keys lists the keys matching pattern (KeysOf), failing the test on an
// error.
func Keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	keys, err := KeysOf(context.Background(), rdb, pattern)
	if err != nil {
		t.Fatalf("redis keys %s: %v", pattern, err)
	}
	return keys
}

// KeysOf lists the keys matching pattern: on a Redis Cluster, every
// master's (KEYS and SCAN see one node's keys only). For tests' small
// key sets; it may run off the test's goroutine.
func KeysOf(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var all []string
	scan := func(ctx context.Context, node redis.Cmdable) error {
		keys, err := node.Keys(ctx, pattern).Result()
		mu.Lock()
		all = append(all, keys...)
		mu.Unlock()
		return err
	}
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	sort.Strings(all)
	return all, err
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

// Redis opens a client to the backend's Redis. A cluster backend has no
// single client: use Universal.
func (b Backend) Redis(t testing.TB) *redis.Client {
	t.Helper()
	if b.IsCluster() {
		t.Fatalf("backend %s is a Redis Cluster: use Backend.Universal", b.Name)
	}
	opt, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatalf("redis url: %v", err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Universal opens a client to the backend's Redis that works on every
// backend: a ClusterClient on a Redis Cluster, a Client otherwise.
func (b Backend) Universal(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb, err := openUniversal(b.RedisMode, b.RedisURL)
	if err != nil {
		t.Fatalf("redis url: %v", err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
