package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// GaleraBackend is a fresh database on the Galera cluster of
// scripts/galera.sh: DSN reaches it through HAProxy (the one node taking
// the writes), NodeDSNs reach the same database on each node directly.
// The database starts empty: database.Open migrates it, through HAProxy.
// Galera returns only once the database is on every node, and every
// session NodeDSNs opens reads with wsrep_sync_wait=1.
type GaleraBackend struct {
	DSN      string
	NodeDSNs []string
}

// Galera creates a fresh database on the cluster SECKILL_TEST_GALERA_URL
// names (the DSN of HAProxy without a database, e.g.
// root@tcp(127.0.0.1:3310)/; scripts/galera.sh url prints one with it),
// whose nodes are SECKILL_TEST_GALERA_NODES (comma-separated host:port,
// default 127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313), and drops it when
// the test ends. Unset or unreachable, it fails the test under CI=true
// and skips it elsewhere.
func Galera(t testing.TB) GaleraBackend {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if InCI() {
			t.Fatalf("CI=true but "+format, args...)
		}
		t.Skipf(format+" (start it with scripts/galera.sh start)", args...)
	}
	url := os.Getenv("SECKILL_TEST_GALERA_URL")
	if url == "" {
		missing("SECKILL_TEST_GALERA_URL is unset: no Galera cluster to test on")
	}
	base, err := gomysql.ParseDSN(url)
	if err != nil {
		t.Fatalf("SECKILL_TEST_GALERA_URL: %v", err)
	}
	base.DBName = ""
	nodes := strings.Split("127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313", ",")
	if v := os.Getenv("SECKILL_TEST_GALERA_NODES"); v != "" {
		nodes = strings.Split(v, ",")
	}
	// Setup, not a check: DDL under total-order isolation waits for every
	// node, and a busy machine may take seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		t.Fatalf("open galera: %v", err)
	}
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		missing("the Galera cluster at %s is unavailable: %v", base.Addr, err)
	}
	dbName := "seckill_g_" + Suffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+dbName+"`"); err != nil {
		_ = admin.Close()
		t.Fatalf("create database %s on galera: %v", dbName, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		// The pool's connection went to the node that took the writes
		// when the test began; a drill that took that node out left it
		// dead (HAProxy shuts a failed server's sessions: "invalid
		// connection"). A new one goes to the node taking them now.
		var err error
		for range 3 {
			if _, err = admin.Exec("DROP DATABASE IF EXISTS `" + dbName + "`"); err == nil || !errors.Is(err, gomysql.ErrInvalidConn) {
				break
			}
		}
		if err != nil {
			t.Errorf("drop database %s on galera: %v", dbName, err)
		}
	})
	dsn := func(addr string, params map[string]string) string {
		c := *base
		c.Addr = addr
		c.DBName = dbName
		c.ParseTime = true
		c.Params = params
		return c.FormatDSN()
	}
	g := GaleraBackend{DSN: dsn(base.Addr, nil)}
	for _, n := range nodes {
		n = strings.TrimSpace(n)
		// Every session on a node waits until the node applied what the
		// cluster committed before each read (wsrep_sync_wait=1), set by
		// the driver on each connection, a new one after a cut included.
		g.NodeDSNs = append(g.NodeDSNs, dsn(n, map[string]string{"wsrep_sync_wait": "1"}))
		if err := databaseOnNode(ctx, base, n, dbName); err != nil {
			t.Fatalf("galera node %s: %v", n, err)
		}
	}
	return g
}

// databaseOnNode waits until the node at addr has applied the CREATE
// DATABASE (DDL runs on each node in the cluster's order, not at once):
// its read waits for the node to catch up (wsrep_sync_wait), so the
// database is there when it answers, or the node is not in the cluster.
func databaseOnNode(ctx context.Context, base *gomysql.Config, addr, dbName string) error {
	c := *base
	c.Addr = addr
	c.Params = map[string]string{"wsrep_sync_wait": "1"}
	n, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer n.Close()
	var found int
	if err := n.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", dbName).Scan(&found); err != nil {
		return fmt.Errorf("does not answer: %w", err)
	}
	if found != 1 {
		return fmt.Errorf("database %s missing after the node caught up with the cluster", dbName)
	}
	return nil
}
