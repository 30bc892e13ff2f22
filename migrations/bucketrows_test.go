package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// openAt opens b's database at schema version 8 (before bucket rows).
func openAt8(t *testing.T, b testenv.Backend) (*sql.DB, migrations.Dialect) {
	t.Helper()
	var db *sql.DB
	var err error
	d := migrations.MySQL
	if b.MySQLDSN != "" {
		db, err = sql.Open("mysql", b.MySQLDSN)
	} else {
		d = migrations.SQLite
		var g *gorm.DB
		if g, err = gorm.Open(sqlite.Open(b.SQLitePath), &gorm.Config{}); err == nil {
			db, err = g.DB()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.UpTo(context.Background(), db, d, 8); err != nil {
		t.Fatal(err)
	}
	return db, d
}

// oldItem writes, with the schema before bucket rows, a lua item of units
// over k buckets whose items row counts sold units, with one live order
// for each of buyers and a cancelled one for each of cancelled.
func oldItem(t *testing.T, db *sql.DB, units, sold int64, k int, buyers, cancelled []string) int64 {
	t.Helper()
	now := time.Now().UTC()
	res, err := db.Exec("INSERT INTO items (name, stock, sold, strategy, buckets, created_at, updated_at) VALUES ('old', ?, ?, 'lua', ?, ?, ?)",
		units, sold, k, now, now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range append(append([]string{}, buyers...), cancelled...) {
		status := stock.StatusCreated
		if i >= len(buyers) {
			status = stock.StatusCancelled
		} else if i%2 == 1 {
			status = stock.StatusPaid
		}
		if _, err := db.Exec("INSERT INTO orders (id, item_id, user_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
			fmt.Sprintf("%036s", fmt.Sprintf("%d-%s", id, u)), id, u, status, now, now); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// Migrations 9 and 10 carry a bucketed item sold with the old schema over
// to bucket rows with nothing lost: each row's sold is its buyers' live
// orders, the free units are shared evenly, and the item then sells
// exactly the rest of its stock.
func TestBucketRowsMigration(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		db, d := openAt8(t, b)
		buyers := names("old", 7)
		id := oldItem(t, db, 20, 7, 4, buyers, names("gone", 2))
		single := oldItem(t, db, 5, 1, 1, names("one", 1), nil)
		applied, err := migrations.Up(ctx, db, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) < 2 || applied[0] != 9 || applied[1] != 10 {
			t.Errorf("applied %v after version 8, want 9 and 10 first", applied)
		}
		live := make([]int64, 4)
		for _, u := range buyers {
			live[stock.HomeBucketOf(u, 4)]++
		}
		st, err := store.New(b.DB(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := st.BucketRows(ctx, id, 4)
		if err != nil {
			t.Fatal(err)
		}
		shares := []int64{4, 3, 3, 3} // 13 free units over 4 rows
		for i, r := range rows {
			if r.Sold != live[i] || r.Live != live[i] || r.Stock != live[i]+shares[i] {
				t.Errorf("row %d: %+v; want sold %d, stock %d", i, r, live[i], live[i]+shares[i])
			}
		}
		if rows, err := st.BucketRows(ctx, single, 1); err != nil || rows != nil {
			t.Errorf("an item of one bucket has rows: %+v, %v", rows, err)
		}
		sold, soldOut := 0, 0
		for _, u := range names("new", 30) {
			o := &stock.Order{ID: fmt.Sprintf("%036s", fmt.Sprintf("%d-%s", id, u)), ItemID: id, UserID: u}
			switch err := st.InsertOrder(ctx, store.OrderWrite{Order: o, Buckets: 4}, 0); {
			case err == nil:
				sold++
			case errors.Is(err, stock.ErrSoldOut):
				soldOut++
			default:
				t.Fatalf("order of %s: %v", u, err)
			}
		}
		if sold != 13 || soldOut != 17 {
			t.Errorf("after the migration: %d sold, %d sold out; want the 13 left sold, 17 sold out", sold, soldOut)
		}
		var itemsSold int64
		if err := db.QueryRow("SELECT sold FROM items WHERE id = ?", id).Scan(&itemsSold); err != nil || itemsSold != 0 {
			t.Errorf("items.sold of the migrated item: %d, %v; want 0 (the rows hold it)", itemsSold, err)
		}
		if it, err := st.Item(ctx, id); err != nil || it.Sold != 20 || it.Stock != 20 {
			t.Errorf("item after the sale: %+v, %v; want 20 of 20 sold", it, err)
		}
	})
}

// An item whose sold disagrees with its live orders is not guessed at:
// migration 10 fails, naming it, and writes no row.
func TestBucketRowsMigrationRefusesDrift(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		db, d := openAt8(t, b)
		id := oldItem(t, db, 20, 5, 4, names("old", 7), nil)
		_, err := migrations.Up(ctx, db, d)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("item %d", id)) {
			t.Fatalf("migration of an item with drift: got %v, want an error naming item %d", err, id)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM item_stock").Scan(&n); err != nil || n != 0 {
			t.Errorf("bucket rows after the failed migration: %d, %v; want none", n, err)
		}
	})
}
