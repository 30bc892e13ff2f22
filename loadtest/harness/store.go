package harness

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/glebarez/sqlite"     // registers database/sql driver "sqlite" (pure Go); already a module dependency
	_ "github.com/go-sql-driver/mysql" // driver "mysql"
)

// SQLStore reads items and orders straight from the service's database.
type SQLStore struct{ db *sql.DB }

// OpenMySQL opens a MySQL/MariaDB DSN (go-sql-driver format).
func OpenMySQL(dsn string) (*SQLStore, error) { return openStore("mysql", dsn) }

// OpenSQLite opens the service's SQLite file read-only.
func OpenSQLite(path string) (*SQLStore, error) {
	return openStore("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
}

func openStore(driver, dsn string) (*SQLStore, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", driver, err)
	}
	return &SQLStore{db: db}, nil
}

func (s *SQLStore) Close() error { return s.db.Close() }

func (s *SQLStore) Orders(ctx context.Context, itemID int64) ([]DBOrder, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, user_id, status FROM orders WHERE item_id = ?", itemID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DBOrder
	for rows.Next() {
		var o DBOrder
		if err := rows.Scan(&o.ID, &o.UserID, &o.Status); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Item reads the item's stock and sold; an item with several buckets
// keeps its sold in its bucket rows (item_stock), summed here.
func (s *SQLStore) Item(ctx context.Context, itemID int64) (DBItem, error) {
	var it DBItem
	err := s.db.QueryRowContext(ctx, "SELECT stock, CASE WHEN buckets > 1 THEN (SELECT SUM(sold) FROM item_stock WHERE item_id = items.id) ELSE sold END FROM items WHERE id = ?", itemID).
		Scan(&it.Stock, &it.Sold)
	return it, err
}
