package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// Every column that holds a user id or an Idempotency-Key compares bytes:
// values that differ only in case are different values, in the unique keys
// and in lookups, as they are in Redis.
func TestIDColumnsCompareBytes(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		db := b.DB(t)
		now := time.Now().UTC()
		for i, v := range []string{"alice", "ALICE", "Alice"} {
			id := strings.Repeat(string(rune('a'+i)), 36)
			if err := db.Exec("INSERT INTO orders (id, item_id, user_id, status, idempotency_key, created_at, updated_at) VALUES (?, 1, ?, 'created', ?, ?, ?)",
				id, v, "key-"+v, now, now).Error; err != nil {
				t.Errorf("order of %s: %v", v, err)
			}
			if err := db.Exec("INSERT INTO order_failures (id, item_id, user_id, idempotency_key, reason, created_at, failed_at) VALUES (?, 1, ?, ?, 'sold_out', ?, ?)",
				id, v, "key-"+v, now, now).Error; err != nil {
				t.Errorf("failure of %s: %v", v, err)
			}
		}
		for _, table := range []string{"orders", "order_failures"} {
			var n int64
			if err := db.Raw("SELECT COUNT(*) FROM "+table+" WHERE user_id = ? OR idempotency_key = ?", "ALICE", "key-ALICE").Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("%s rows matching ALICE or key-ALICE: got %d, want 1", table, n)
			}
		}
		// The same bytes still clash.
		if err := db.Exec("INSERT INTO orders (id, item_id, user_id, status, created_at, updated_at) VALUES (?, 1, 'ALICE', 'created', ?, ?)",
			strings.Repeat("z", 36), now, now).Error; err == nil {
			t.Errorf("a second order of ALICE for the item was accepted")
		}
		if b.MySQLDSN == "" {
			var ddl string
			if err := db.Raw("SELECT group_concat(sql, ';') FROM sqlite_master WHERE name IN ('orders', 'order_failures')").Scan(&ddl).Error; err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToUpper(ddl), "NOCASE") {
				t.Errorf("an SQLite table compares without case: %s", ddl)
			}
		}
	})
}

// Processes that start together on a fresh MySQL database (three instances
// and a worker) all migrate it: one applies the migrations, the others wait
// for it and apply nothing. Without the lock all but one failed on DDL the
// first had just run.
func TestConcurrentUpOnOneDatabase(t *testing.T) {
	for round := range 5 { // the race without the lock shows in most rounds, not all
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			b := testenv.Real(t) // a new, empty database
			upAtOnce(t, []string{b.MySQLDSN, b.MySQLDSN, b.MySQLDSN, b.MySQLDSN})
		})
	}
}

// Migration 7 stores order ids as ASCII compared byte by byte, in orders
// and order_failures, and keeps the rows written before it.
func TestOrderIDsASCII(t *testing.T) {
	b := testenv.Real(t) // a new, empty database
	db, err := sql.Open("mysql", b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.UpTo(ctx, db, migrations.MySQL, 6); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	id := "0192f5a4-7c1e-7abc-8def-0123456789ab"
	if _, err := db.Exec("INSERT INTO orders (id, item_id, user_id, status, created_at, updated_at) VALUES (?, 1, 'alice', 'created', ?, ?)", id, now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO order_failures (id, item_id, user_id, reason, created_at, failed_at) VALUES (?, 1, 'bob', 'sold_out', ?, ?)", id, now, now); err != nil {
		t.Fatal(err)
	}
	applied, err := migrations.Up(ctx, db, migrations.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != 7 {
		t.Errorf("applied %v after version 6, want 7 first", applied)
	}
	for _, table := range []string{"orders", "order_failures"} {
		var charset, collation string
		err := db.QueryRow("SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'id'", table).
			Scan(&charset, &collation)
		if err != nil {
			t.Fatal(err)
		}
		if charset != "ascii" || collation != "ascii_bin" {
			t.Errorf("%s.id is %s/%s, want ascii/ascii_bin", table, charset, collation)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s: the row written before the migration: found %d, want 1", table, n)
		}
		if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE id = ?", strings.ToUpper(id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: the upper-case id matched %d rows, want 0 (bytes compared)", table, n)
		}
	}
}

// upAtOnce runs Up at once in one process a DSN (each its own pool), on
// one new database, and fails unless every one succeeds and exactly one
// applies the migrations.
func upAtOnce(t *testing.T, dsns []string) {
	t.Helper()
	errs := make([]error, len(dsns))
	applied := make([][]int64, len(dsns))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, dsn := range dsns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			<-start
			applied[i], errs[i] = migrations.Up(context.Background(), db, migrations.MySQL)
		}()
	}
	close(start)
	wg.Wait()
	ran := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d (%s): %v", i, dsns[i], err)
		}
		if len(applied[i]) > 0 {
			ran++
		}
	}
	if ran != 1 {
		t.Errorf("%d processes applied migrations (%v), want exactly one", ran, applied)
	}
}
