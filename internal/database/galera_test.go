package database_test

import (
	"context"
	"database/sql"
	"regexp"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

var nextID = regexp.MustCompile(` AUTO_INCREMENT=[0-9]+`)

// The migrations run through HAProxy on one node; their DDL runs under
// Galera's total-order isolation, so every node ends with the same tables,
// CHECK constraints included, and enforces them on its own.
func TestGaleraMigrationsReachEveryNode(t *testing.T) {
	g := testenv.Galera(t)
	ctx := context.Background()
	db, _, applied, err := database.Open(ctx, g.DSN, "")
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { _ = sqlDB.Close() })
	if len(applied) == 0 {
		t.Fatal("no migration was applied to a new database")
	}
	schemaOf := func(n *sql.DB) map[string]string {
		t.Helper()
		rows, err := n.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			names = append(names, s)
		}
		rows.Close()
		out := map[string]string{}
		for _, name := range names {
			var tn, create string
			if err := n.QueryRowContext(ctx, "SHOW CREATE TABLE `"+name+"`").Scan(&tn, &create); err != nil {
				t.Fatal(err)
			}
			// The next id differs per node: Galera's auto-increment
			// control steps ids by the cluster size, from each node's own
			// offset (wsrep_auto_increment_control), so a node that took
			// no insert has a lower counter. Nothing relies on ids being
			// consecutive.
			out[name] = nextID.ReplaceAllString(create, "")
		}
		return out
	}
	want := schemaOf(sqlDB)
	if len(want) < 2 {
		t.Fatalf("the writer has %d tables after the migrations", len(want))
	}
	for i, dsn := range g.NodeDSNs {
		n, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		n.SetMaxOpenConns(1)
		if _, err := n.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
			t.Fatal(err)
		}
		got := schemaOf(n)
		if len(got) != len(want) {
			t.Errorf("node %d has %d tables, the writer %d", i+1, len(got), len(want))
		}
		for name, create := range want {
			if got[name] != create {
				t.Errorf("node %d: table %s differs:\n%s\nwriter:\n%s", i+1, name, got[name], create)
			}
		}
		// The CHECK holds on this node too: sold past stock is refused.
		if _, err := n.ExecContext(ctx, "INSERT INTO items (name, price_cents, stock, sold, strategy, created_at, updated_at) VALUES ('c', 1, 1, 2, 'lock', UTC_TIMESTAMP(), UTC_TIMESTAMP())"); err == nil {
			t.Errorf("node %d accepted an item with sold 2 of stock 1: its CHECK constraint is missing", i+1)
		} else if me, ok := err.(*gomysql.MySQLError); !ok || me.Number != 4025 {
			t.Errorf("node %d: want the CHECK's refusal (4025), got %v", i+1, err)
		}
	}
}

// On Galera every session reads with wsrep_sync_wait=1, so a read after a
// failover sees what the cluster committed; a single server is left alone.
func TestGaleraSessionsWaitForCausality(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, dsn string
		want      int64
	}{{"galera", testenv.Galera(t).DSN, 1}, {"single", testenv.Real(t).MySQLDSN, 0}} {
		db, _, _, err := database.Open(ctx, c.dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		sqlDB, _ := db.DB()
		var got int64
		if err := sqlDB.QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait").Scan(&got); err != nil {
			t.Fatal(err)
		}
		_ = sqlDB.Close()
		if got != c.want {
			t.Errorf("%s: wsrep_sync_wait %d, want %d", c.name, got, c.want)
		}
	}
}
