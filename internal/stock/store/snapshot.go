package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Buyers is what the database says of an item and its buyers, read in one
// transaction.
type Buyers struct {
	Item      *stock.Item       // stock, sold, strategy and sale window
	Users     map[string]string // user -> order id, of every order row (a cancelled order still counts as the user's one)
	Done      map[string]bool   // order ids written or recorded as failed
	Live      int64             // order rows not cancelled
	Failed    int64             // orders recorded as failed
	Cancelled []string          // ids of cancelled orders: their units are back (released)
	Roomed    bool              // the item has a waiting room (item_rooms)
}

// BuyersSnapshot reads an item's Buyers.
func (s *Store) BuyersSnapshot(ctx context.Context, id int64) (Buyers, error) {
	var b Buyers
	err := s.inTx(ctx, nil, func(tx *sql.Tx) (err error) {
		b, err = buyersIn(ctx, tx, id)
		return err
	})
	return b, err
}

func buyersIn(ctx context.Context, tx *sql.Tx, id int64) (b Buyers, err error) {
	it := &stock.Item{ID: id}
	var startsAt, endsAt *time.Time
	var roomed bool
	err = tx.QueryRowContext(ctx, "SELECT stock, "+soldOf+", strategy, buckets, starts_at, ends_at, "+roomExists+" FROM items WHERE id = ?", id, id).
		Scan(&it.Stock, &it.Sold, &it.Strategy, &it.Buckets, &startsAt, &endsAt, &roomed)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return b, fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
		}
		return b, dbError("read item", err)
	}
	it.StartsAt, it.EndsAt = startsAt, endsAt
	b = Buyers{Item: it, Users: map[string]string{}, Done: map[string]bool{}, Roomed: roomed}
	rows, err := tx.QueryContext(ctx, "SELECT id, user_id, status, 0 FROM orders WHERE item_id = ? UNION ALL SELECT id, user_id, '', 1 FROM order_failures WHERE item_id = ?", id, id)
	if err != nil {
		return b, dbError("read buyers", err)
	}
	defer rows.Close()
	for rows.Next() {
		var oid, user, status string
		var failed bool
		if err := rows.Scan(&oid, &user, &status, &failed); err != nil {
			return b, dbError("read buyers", err)
		}
		b.Done[oid] = true
		switch {
		case failed:
			b.Failed++
		default:
			b.Users[user] = oid
			if status == stock.StatusCancelled {
				b.Cancelled = append(b.Cancelled, oid)
			} else {
				b.Live++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return b, dbError("read buyers", err)
	}
	return b, nil
}
