package app_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string
	}{
		{"defaults", nil, nil, nil},
		{"mysql needs a token", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/seckill"}, nil,
			[]string{"SECKILL_ADMIN_TOKEN is required"}},
		{"every bad value reported", map[string]string{"SECKILL_STRATEGY": "magic", "SECKILL_REDIS_URL": "localhost:6379", "SECKILL_ADMIN_TOKEN": "short"}, nil,
			[]string{"SECKILL_STRATEGY=\"magic\"", "SECKILL_REDIS_URL=\"localhost:6379\"", "at least 16 characters"}},
		{"bad duration", map[string]string{"SECKILL_LOCK_WAIT": "soon"}, nil, []string{"SECKILL_LOCK_WAIT=\"soon\""}},
		{"flag wins over env", map[string]string{"SECKILL_STRATEGY": "magic"}, []string{"-strategy", "lock"}, nil},
		{"operations settings", map[string]string{"SECKILL_LOG_FORMAT": "json", "SECKILL_LOG_LEVEL": "debug", "SECKILL_RATE_USER": "600/m:20",
			"SECKILL_RATE_IP": "200/s", "SECKILL_REQUEST_TIMEOUT": "3s", "SECKILL_ADMIN_ADDR": ":9090", "SECKILL_PPROF": "true",
			"SECKILL_USER_JWT_SECRET": strings.Repeat("s", 32)}, nil, nil},
		{"every bad operations value reported", map[string]string{"SECKILL_LOG_FORMAT": "xml", "SECKILL_LOG_LEVEL": "loud",
			"SECKILL_RATE_USER": "ten", "SECKILL_RATE_IP": "5/d", "SECKILL_USER_JWT_SECRET": "short", "SECKILL_REQUEST_TIMEOUT": "2h"}, nil,
			[]string{`SECKILL_LOG_FORMAT="xml"`, `SECKILL_LOG_LEVEL="loud"`, `SECKILL_RATE_USER="ten"`, `SECKILL_RATE_IP="5/d"`,
				"SECKILL_USER_JWT_SECRET must be at least 32 bytes", "SECKILL_REQUEST_TIMEOUT=2h0m0s"}},
		{"identity provider", map[string]string{"SECKILL_USER_JWKS_URL": "https://idp.example/.well-known/jwks.json",
			"SECKILL_USER_JWT_ISSUER": "https://idp.example/", "SECKILL_USER_JWT_AUDIENCE": "seckill", "SECKILL_USER_JWKS_REFRESH": "1h"}, nil, nil},
		{"every bad identity provider value reported", map[string]string{"SECKILL_USER_JWKS_URL": "ftp://idp.example/jwks",
			"SECKILL_USER_JWT_SECRET": strings.Repeat("s", 32), "SECKILL_USER_JWKS_REFRESH": "1s"}, nil,
			[]string{`SECKILL_USER_JWKS_URL="ftp://idp.example/jwks": want an http:// or https://`, "SECKILL_USER_JWT_SECRET and SECKILL_USER_JWKS_URL are both set",
				"needs SECKILL_USER_JWT_ISSUER", "needs SECKILL_USER_JWT_AUDIENCE", "SECKILL_USER_JWKS_REFRESH=1s: want 1m0s to 24h0m0s"}},
		{"an address with no host", map[string]string{"SECKILL_USER_JWKS_URL": "https:///jwks", "SECKILL_USER_JWT_ISSUER": "i",
			"SECKILL_USER_JWT_AUDIENCE": "a"}, nil, []string{`SECKILL_USER_JWKS_URL="https:///jwks"`}},
		{"issuer without tokens", map[string]string{"SECKILL_USER_JWT_AUDIENCE": "seckill"}, nil,
			[]string{"set SECKILL_USER_JWKS_URL or SECKILL_USER_JWT_SECRET too"}},
		{"issuer and audience with the secret", map[string]string{"SECKILL_USER_JWT_SECRET": strings.Repeat("s", 32),
			"SECKILL_USER_JWT_ISSUER": "shop", "SECKILL_USER_JWT_AUDIENCE": "seckill"}, nil, nil},
		{"bad burst", map[string]string{"SECKILL_RATE_USER": "5/s:0"}, nil, []string{`SECKILL_RATE_USER="5/s:0"`}},
		{"pprof needs the admin listener", map[string]string{"SECKILL_PPROF": "true"}, nil, []string{"SECKILL_PPROF=true needs SECKILL_ADMIN_ADDR"}},
		{"bad bool", map[string]string{"SECKILL_PPROF": "maybe"}, nil, []string{`SECKILL_PPROF="maybe": want true or false`}},
		{"admin address differs", map[string]string{"SECKILL_ADDR": ":8080", "SECKILL_ADMIN_ADDR": ":8080"}, nil, []string{"must differ from SECKILL_ADDR"}},
		{"lua-async settings", map[string]string{"SECKILL_STRATEGY": "lua-async", "SECKILL_WRITERS": "0", "SECKILL_WRITER_BATCH": "1000",
			"SECKILL_CLAIM_IDLE": "10s", "SECKILL_MAX_DELIVERIES": "3", "SECKILL_ASYNC_DURABILITY": "fsync", "SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0"}, nil, nil},
		{"every bad lua-async value reported", map[string]string{"SECKILL_WRITERS": "many", "SECKILL_WRITER_BATCH": "100000",
			"SECKILL_CLAIM_IDLE": "5ms", "SECKILL_MAX_DELIVERIES": "-1", "SECKILL_ASYNC_DURABILITY": "paranoid"}, nil,
			[]string{`SECKILL_WRITERS="many": not an integer`}},
		{"every bad lua-async range reported", map[string]string{"SECKILL_WRITERS": "65", "SECKILL_WRITER_BATCH": "100000",
			"SECKILL_CLAIM_IDLE": "5ms", "SECKILL_MAX_DELIVERIES": "-1", "SECKILL_ASYNC_DURABILITY": "paranoid"}, nil,
			[]string{"SECKILL_WRITERS=65", "SECKILL_WRITER_BATCH=100000", "SECKILL_CLAIM_IDLE=5ms", "SECKILL_MAX_DELIVERIES=-1",
				`SECKILL_ASYNC_DURABILITY="paranoid"`}},
		{"claim idle at its floor", map[string]string{"SECKILL_CLAIM_IDLE": "5s"}, nil, nil},
		{"claim idle below its floor", map[string]string{"SECKILL_CLAIM_IDLE": "100ms"}, nil,
			[]string{"SECKILL_CLAIM_IDLE=100ms: at least 5s"}},
		{"claim idle just below its floor", map[string]string{"SECKILL_CLAIM_IDLE": "4s"}, nil,
			[]string{"SECKILL_CLAIM_IDLE=4s: at least 5s"}},
		{"fsync needs a real Redis", map[string]string{"SECKILL_ASYNC_DURABILITY": "fsync"}, nil,
			[]string{"SECKILL_ASYNC_DURABILITY=fsync needs SECKILL_REDIS_URL"}},
		{"no writers needs a real Redis", map[string]string{"SECKILL_WRITERS": "0"}, nil,
			[]string{"SECKILL_WRITERS=0 needs SECKILL_REDIS_URL"}},
		{"no writers by flag needs a real Redis", nil, []string{"-writers", "0"},
			[]string{"SECKILL_WRITERS=0 needs SECKILL_REDIS_URL"}},
		{"payment timeout off", map[string]string{"SECKILL_PAYMENT_TIMEOUT": "0"}, nil, nil},
		{"lock wait and db timeout under the request timeout", map[string]string{"SECKILL_REQUEST_TIMEOUT": "4s", "SECKILL_LOCK_WAIT": "3s",
			"SECKILL_DB_TIMEOUT": "500ms"}, nil, nil},
		{"lock wait over the request timeout", map[string]string{"SECKILL_LOCK_WAIT": "12s"}, nil,
			[]string{"SECKILL_LOCK_WAIT=12s: must be under SECKILL_REQUEST_TIMEOUT (10s)"}},
		{"lock wait equal to the request timeout", map[string]string{"SECKILL_REQUEST_TIMEOUT": "3s", "SECKILL_LOCK_WAIT": "3s"}, nil,
			[]string{"SECKILL_LOCK_WAIT=3s: must be under SECKILL_REQUEST_TIMEOUT (3s)"}},
		{"db timeout over the request timeout", map[string]string{"SECKILL_REQUEST_TIMEOUT": "2s", "SECKILL_DB_TIMEOUT": "5s"}, nil,
			[]string{"SECKILL_DB_TIMEOUT=5s: must be under SECKILL_REQUEST_TIMEOUT (2s)"}},
		{"payment timeout by flag", nil, []string{"-payment-timeout", "30s"}, nil},
		{"negative payment timeout", map[string]string{"SECKILL_PAYMENT_TIMEOUT": "-1m"}, nil,
			[]string{"SECKILL_PAYMENT_TIMEOUT=-1m0s: must not be negative (0 = orders never expire)"}},
		{"room proof-of-work on", map[string]string{"SECKILL_ROOM_POW_BITS": "16"}, nil, nil},
		{"room proof-of-work at its most", nil, []string{"-room-pow-bits", "32"}, nil},
		{"room proof-of-work too hard", map[string]string{"SECKILL_ROOM_POW_BITS": "33"}, nil, []string{"SECKILL_ROOM_POW_BITS=33: want 0 (off) to 32"}},
		{"room proof-of-work negative", nil, []string{"-room-pow-bits", "-1"}, []string{"SECKILL_ROOM_POW_BITS=-1: want 0 (off) to 32"}},
		{"room proof-of-work not a number", map[string]string{"SECKILL_ROOM_POW_BITS": "lots"}, nil, []string{`SECKILL_ROOM_POW_BITS="lots": not an integer`}},
		{"payment timeout not a duration", map[string]string{"SECKILL_PAYMENT_TIMEOUT": "soon"}, nil, []string{`SECKILL_PAYMENT_TIMEOUT="soon"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, err := app.ParseConfig(fs, tc.args, env(tc.env))
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got error %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestPaymentTimeoutSetting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want time.Duration
	}{
		{"default", nil, nil, app.DefaultPaymentTimeout},
		{"off", map[string]string{"SECKILL_PAYMENT_TIMEOUT": "0"}, nil, 0},
		{"flag wins", map[string]string{"SECKILL_PAYMENT_TIMEOUT": "0"}, []string{"-payment-timeout", "90s"}, 90 * time.Second},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := app.ParseConfig(fs, tc.args, env(tc.env))
		if err != nil || cfg.PaymentTimeout != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, cfg.PaymentTimeout, err, tc.want)
		}
	}
	if app.DefaultPaymentTimeout != 15*time.Minute {
		t.Errorf("DefaultPaymentTimeout: got %s, want 15m", app.DefaultPaymentTimeout)
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := app.Main([]string{"--help"}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("exit code: got %d, want 0", code)
	}
	for _, v := range []string{"SECKILL_ADDR", "SECKILL_REDIS_URL", "SECKILL_REDIS_MODE", "SECKILL_MYSQL_DSN", "SECKILL_ADMIN_TOKEN", "SECKILL_STRATEGY", "SECKILL_REDIS_TIMEOUT", "SECKILL_LOCK_WAIT", "SECKILL_DB_TIMEOUT",
		"SECKILL_REQUEST_TIMEOUT", "SECKILL_LOG_FORMAT", "SECKILL_LOG_LEVEL", "SECKILL_RATE_USER", "SECKILL_RATE_IP", "SECKILL_USER_JWT_SECRET",
		"SECKILL_USER_JWKS_URL", "SECKILL_USER_JWT_ISSUER", "SECKILL_USER_JWT_AUDIENCE", "SECKILL_USER_JWKS_REFRESH", "SECKILL_ADMIN_ADDR", "SECKILL_PPROF", "SECKILL_WRITERS", "SECKILL_ASYNC_DURABILITY", "SECKILL_PAYMENT_TIMEOUT", "migrate", "worker"} {
		if !strings.Contains(errb.String(), v) {
			t.Errorf("--help does not mention %s:\n%s", v, errb.String())
		}
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	testenv.ForEachEmpty(t, func(t *testing.T, b testenv.Backend) {
		e := env(map[string]string{"SECKILL_MYSQL_DSN": b.MySQLDSN, "SECKILL_SQLITE_PATH": b.SQLitePath, "SECKILL_ADMIN_TOKEN": apptest.Token})
		var out, errb bytes.Buffer
		if code := app.Main([]string{"migrate"}, e, &out, &errb); code != 0 {
			t.Fatalf("first migrate: exit %d: %s", code, errb.String())
		}
		if want := fmt.Sprintf("applied migrations %v", migrationVersions(t)); !strings.Contains(out.String(), want) {
			t.Errorf("first migrate said %q, want %q", out.String(), want)
		}
		out.Reset()
		if code := app.Main([]string{"migrate"}, e, &out, &errb); code != 0 {
			t.Fatalf("second migrate: exit %d: %s", code, errb.String())
		}
		if !strings.Contains(out.String(), "already up to date") {
			t.Errorf("second migrate said %q, want already up to date", out.String())
		}
	})
}

// migrationVersions lists the versions in migrations/mysql (the SQLite
// folder has the same ones) and the Go migrations in migrations.
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := filepath.Glob("../../migrations/mysql/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	var vs []int64
	for _, f := range files {
		v, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		vs = append(vs, v)
	}
	// And the Go migrations (goose.NewGoMigration(version, ...)).
	gofiles, err := filepath.Glob("../../migrations/*.go")
	if err != nil {
		t.Fatal(err)
	}
	goMigration := regexp.MustCompile(`goose\.NewGoMigration\((\d+),`)
	for _, f := range gofiles {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goMigration.FindAllSubmatch(src, -1) {
			v, _ := strconv.ParseInt(string(m[1]), 10, 64)
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

func TestMissingMySQLDatabaseIsReported(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	dsn := strings.Replace(b.MySQLDSN, "/seckill_t_", "/seckill_missing_", 1)
	var out, errb bytes.Buffer
	code := app.Main([]string{"migrate"}, env(map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_ADMIN_TOKEN": apptest.Token}), &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "does not exist") || !strings.Contains(errb.String(), "never creates it") {
		t.Errorf("got exit %d and %q, want a failure saying the database does not exist", code, errb.String())
	}
}

// The embedded default: nothing configured but a file path.
func TestEmbeddedDefaultSells(t *testing.T) {
	t.Parallel()
	a, err := app.New(context.Background(), app.Config{SQLitePath: filepath.Join(t.TempDir(), "seckill.db")},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if len(a.AdminToken()) != 32 {
		t.Errorf("generated admin token %q: want 32 hex characters", a.AdminToken())
	}
	if !strings.Contains(strings.Join(a.Backends(), ";"), "embedded redis") {
		t.Errorf("backends %v: want the embedded redis", a.Backends())
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	c := apptest.NewClient(srv.URL, a.AdminToken())
	it := c.CreateItem(t, 1, "lua")
	if r, _ := c.PlaceOrder(it.ID, "alice", ""); r.Status != 201 {
		t.Errorf("first order: got %d %s, want 201", r.Status, r.Body)
	}
	if r, _ := c.PlaceOrder(it.ID, "bob", ""); r.Status != 409 || r.ErrorCode() != "sold_out" {
		t.Errorf("second order: got %d %s, want 409 sold_out", r.Status, r.Body)
	}
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cfg      app.Config
		wantJSON bool
		debug    bool
	}{
		{"embedded default is text", app.Config{}, false, false},
		{"real backends default to json", app.Config{RedisURL: "redis://127.0.0.1:6379/0"}, true, false},
		{"format forced to text", app.Config{MySQLDSN: "x", LogFormat: "text"}, false, false},
		{"format forced to json", app.Config{LogFormat: "json", LogLevel: "debug"}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := app.NewLogger(tc.cfg, &buf)
			log.Debug("dbg")
			log.Info("hello")
			out := buf.String()
			if got := strings.HasPrefix(out, "{"); got != tc.wantJSON {
				t.Errorf("JSON: got %v, want %v: %q", got, tc.wantJSON, out)
			}
			if got := strings.Contains(out, "dbg"); got != tc.debug {
				t.Errorf("debug line logged: got %v, want %v: %q", got, tc.debug, out)
			}
		})
	}
}

// A worker shares Redis and the database with the service, so it refuses
// the embedded ones, and a worker without writers.
func TestWorkerNeedsRealBackends(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{nil, "needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN"},
		{map[string]string{"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0", "SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x",
			"SECKILL_ADMIN_TOKEN": apptest.Token, "SECKILL_WRITERS": "0"}, "a worker without writers"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		if code := app.Main([]string{"worker"}, env(tc.env), &out, &errb); code != 2 {
			t.Errorf("seckill worker with %v: exit %d, want 2; stderr %s", tc.env, code, errb.String())
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("seckill worker with %v: stderr %q, want it to say %q", tc.env, errb.String(), tc.want)
		}
	}
}

// A service without lua-async writers on the embedded Redis would answer
// 202s that nothing can ever write (seckill worker refuses the embedded
// Redis, and it lives in this process): it must not start.
func TestNoWritersNeedsARealRedis(t *testing.T) {
	t.Parallel()
	cfg := app.Config{Writers: queue.NoWriters, SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
	a, err := app.New(context.Background(), cfg, nil)
	if err == nil {
		_ = a.Close()
		t.Fatal("app.New with no writers and the embedded Redis: got a running app, want an error")
	}
	if !strings.Contains(err.Error(), "SECKILL_WRITERS=0 needs SECKILL_REDIS_URL") {
		t.Errorf("app.New with no writers and the embedded Redis: got %v, want it to say SECKILL_WRITERS=0 needs SECKILL_REDIS_URL", err)
	}
	var out, errb bytes.Buffer
	env := env(map[string]string{"SECKILL_WRITERS": "0", "SECKILL_SQLITE_PATH": cfg.SQLitePath})
	if code := app.Main(nil, env, &out, &errb); code != 2 || !strings.Contains(errb.String(), "SECKILL_WRITERS=0 needs SECKILL_REDIS_URL") {
		t.Errorf("seckill with SECKILL_WRITERS=0 and the embedded Redis: exit %d, stderr %q; want 2 and the reason", code, errb.String())
	}
}
