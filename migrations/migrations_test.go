package migrations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
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
