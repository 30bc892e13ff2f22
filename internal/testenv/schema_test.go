package testenv

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/database"
)

// openApplies opens b's database as the service does and returns the
// migrations that open applied.
func openApplies(t *testing.T, b Backend) []int64 {
	t.Helper()
	db, _, applied, err := database.Open(context.Background(), b.MySQLDSN, b.SQLitePath)
	if err != nil {
		t.Fatalf("open %s: %v", b.Name, err)
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
	return applied
}

// A backend's database starts with the whole schema, copied from the
// template, so the service finds no migration to apply; two databases
// are two copies, not one; ForEachEmpty's start empty and migrate in full.
func TestDatabasesStartWithTheSchema(t *testing.T) {
	t.Parallel()
	ForEach(t, func(t *testing.T, b Backend) {
		if applied := openApplies(t, b); len(applied) != 0 {
			t.Errorf("a new database with the schema applied migrations %v; want none", applied)
		}
		db := b.DB(t)
		if err := db.Exec("INSERT INTO items (name, stock, strategy, created_at, updated_at) VALUES ('only here', 1, 'lua', '2026-11-28 00:00:00', '2026-11-28 00:00:00')").Error; err != nil {
			t.Fatalf("insert an item: %v", err)
		}
		var other Backend
		if b.MySQLDSN != "" {
			other = Real(t)
		} else {
			other = Embedded(t)
		}
		var n int64
		if err := other.DB(t).Raw("SELECT COUNT(*) FROM items").Scan(&n).Error; err != nil || n != 0 {
			t.Errorf("another new database holds %d items (%v); want its own, empty table", n, err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		var full []int64
		ForEachEmpty(t, func(t *testing.T, b Backend) {
			applied := openApplies(t, b)
			if len(applied) == 0 {
				t.Fatal("an empty database applied no migration")
			}
			if full != nil && len(applied) != len(full) {
				t.Errorf("applied %v here and %v on the other backend", applied, full)
			}
			full = applied
		})
	})
}
