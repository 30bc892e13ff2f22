package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/seckill/seckill/internal/stock"
)

// splitBucketRows is migration 10, in Go because it needs the buyers' home
// buckets (a hash of the user id, stock.HomeBucketOf): it carries every
// item with buckets > 1 made before bucket rows over to item_stock, with
// nothing lost. Row b's sold is the number of the item's live orders
// (created or paid) whose buyer's home bucket is b, so each cancel later
// gives its unit back to the row it came from; the free units (stock -
// sold) are shared evenly, the remainder to the first rows. The sums must
// equal the items row's stock and sold, or the migration fails, changing
// nothing (it runs in one transaction). The items row's sold is then 0, as
// for an item made with bucket rows: its sold is the rows' sum.
var splitBucketRows = goose.NewGoMigration(10, &goose.GoFunc{RunTx: splitBuckets}, &goose.GoFunc{RunTx: joinBuckets})

type bucketedItem struct {
	id, stock, sold int64
	k               int
}

func splitBuckets(ctx context.Context, tx *sql.Tx) error {
	items, err := bucketedItems(ctx, tx, " AND NOT EXISTS (SELECT 1 FROM item_stock WHERE item_id = items.id)")
	if err != nil {
		return err
	}
	for _, it := range items {
		sold := make([]int64, it.k)
		var live int64
		rows, err := tx.QueryContext(ctx, "SELECT user_id FROM orders WHERE item_id = ? AND status IN (?, ?)",
			it.id, stock.StatusCreated, stock.StatusPaid)
		if err != nil {
			return fmt.Errorf("item %d: read orders: %w", it.id, err)
		}
		for rows.Next() {
			var user string
			if err := rows.Scan(&user); err != nil {
				rows.Close()
				return fmt.Errorf("item %d: read orders: %w", it.id, err)
			}
			sold[stock.HomeBucketOf(user, it.k)]++
			live++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("item %d: read orders: %w", it.id, err)
		}
		if live != it.sold || it.sold > it.stock {
			return fmt.Errorf("item %d: %d live orders, but the item says %d sold of %d: reconcile it before this migration", it.id, live, it.sold, it.stock)
		}
		free := it.stock - it.sold
		var sumStock, sumSold int64
		for b := range it.k {
			units := sold[b] + free/int64(it.k)
			if int64(b) < free%int64(it.k) {
				units++
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO item_stock (item_id, bucket, stock, sold) VALUES (?, ?, ?, ?)",
				it.id, b, units, sold[b]); err != nil {
				return fmt.Errorf("item %d: bucket row %d: %w", it.id, b, err)
			}
			sumStock += units
			sumSold += sold[b]
		}
		if sumStock != it.stock || sumSold != it.sold {
			return fmt.Errorf("item %d: bucket rows sum to %d stock, %d sold; the item has %d, %d", it.id, sumStock, sumSold, it.stock, it.sold)
		}
		// items.sold is not kept for a bucketed item: 0, as for one made
		// with bucket rows (a stale count would trip items' own CHECK on a
		// later cut of the stock).
		if _, err := tx.ExecContext(ctx, "UPDATE items SET sold = 0 WHERE id = ?", it.id); err != nil {
			return fmt.Errorf("item %d: %w", it.id, err)
		}
	}
	return nil
}

// joinBuckets is migration 10's down: each item's sold goes back to its
// items row, and the rows go.
func joinBuckets(ctx context.Context, tx *sql.Tx) error {
	items, err := bucketedItems(ctx, tx, "")
	if err != nil {
		return err
	}
	for _, it := range items {
		if _, err := tx.ExecContext(ctx, "UPDATE items SET sold = (SELECT COALESCE(SUM(sold), 0) FROM item_stock WHERE item_id = ?) WHERE id = ?", it.id, it.id); err != nil {
			return fmt.Errorf("item %d: %w", it.id, err)
		}
	}
	_, err = tx.ExecContext(ctx, "DELETE FROM item_stock")
	return err
}

// bucketedItems lists the items with buckets > 1 (and the condition where).
func bucketedItems(ctx context.Context, tx *sql.Tx, where string) ([]bucketedItem, error) {
	rows, err := tx.QueryContext(ctx, "SELECT id, stock, sold, buckets FROM items WHERE buckets > 1"+where+" ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read bucketed items: %w", err)
	}
	defer rows.Close()
	var items []bucketedItem
	for rows.Next() {
		var it bucketedItem
		if err := rows.Scan(&it.id, &it.stock, &it.sold, &it.k); err != nil {
			return nil, fmt.Errorf("read bucketed items: %w", err)
		}
		items = append(items, it)
	}
	return items, rows.Err()
}
