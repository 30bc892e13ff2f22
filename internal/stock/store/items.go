package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
)

type itemRow struct {
	ID         int64 `gorm:"primaryKey"`
	Name       string
	PriceCents int64
	Stock      int64
	Sold       int64
	Strategy   stock.StrategyName
	Buckets    int
	LockFence  int64
	StartsAt   *time.Time
	EndsAt     *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func (itemRow) TableName() string { return "items" }

func (r *itemRow) item() *stock.Item {
	return &stock.Item{
		ID: r.ID, Name: r.Name, PriceCents: r.PriceCents, Stock: r.Stock, Sold: r.Sold,
		Strategy: r.Strategy, Buckets: max(1, r.Buckets), StartsAt: utcPtr(r.StartsAt), EndsAt: utcPtr(r.EndsAt),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// CreateItem inserts it and fills in its id and timestamps. with, when
// not nil, writes in the same transaction (an item's waiting room): both
// are stored, or neither. An item with several buckets gets its bucket
// rows in that transaction too, its stock split evenly.
func (s *Store) CreateItem(ctx context.Context, it *stock.Item, with WithItem) error {
	now := Now()
	row := itemRow{Name: it.Name, PriceCents: it.PriceCents, Stock: it.Stock, Strategy: it.Strategy,
		Buckets: max(1, it.Buckets), StartsAt: utcPtr(it.StartsAt), EndsAt: utcPtr(it.EndsAt), CreatedAt: now, UpdatedAt: now}
	if with == nil && row.Buckets <= 1 {
		if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
			return dbError("create item", err)
		}
		*it = *row.item()
		return nil
	}
	var inner error
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			inner = dbError("create item", err)
			return inner
		}
		if row.Buckets > 1 {
			if inner = createBucketRows(tx, row.ID, row.Stock, row.Buckets); inner != nil {
				return inner
			}
		}
		if with != nil {
			inner = with(ctx, tx, row.ID)
		}
		return inner
	})
	if err != nil {
		if inner == nil {
			return dbError("create item", err) // BEGIN or COMMIT
		}
		return err
	}
	*it = *row.item()
	return nil
}

// MaxItemID reads the highest item id (0 when there is none). Item ids only
// grow and items are never deleted, so every id above it is unknown.
func (s *Store) MaxItemID(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&itemRow{}).Select("COALESCE(MAX(id), 0)").Scan(&n).Error; err != nil {
		return 0, dbError("read highest item id", err)
	}
	return n, nil
}

// Item reads one item; stock.ErrNotFound when there is none.
func (s *Store) Item(ctx context.Context, id int64) (*stock.Item, error) {
	var row itemRow
	err := s.db.WithContext(ctx).Select(itemColumns).Take(&row, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("read item", err)
	}
	return row.item(), nil
}

// ItemIDs lists every item, in id order.
func (s *Store) ItemIDs(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&itemRow{}).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, dbError("list items", err)
	}
	return ids, nil
}

// ItemsSoldBy lists the items sold by strategy, in id order.
func (s *Store) ItemsSoldBy(ctx context.Context, strategy stock.StrategyName) ([]int64, error) {
	var ids []int64
	err := s.db.WithContext(ctx).Model(&itemRow{}).Where("strategy = ?", strategy).Order("id").Pluck("id", &ids).Error
	if err != nil {
		return nil, dbError("list "+string(strategy)+" items", err)
	}
	return ids, nil
}

// ItemBuckets is an item id with its bucket count.
type ItemBuckets struct {
	ID      int64
	Buckets int
}

// ItemBucketsSoldBy lists the items of one strategy with their bucket
// counts (which never change once the item is created), by id.
func (s *Store) ItemBucketsSoldBy(ctx context.Context, strategy stock.StrategyName) ([]ItemBuckets, error) {
	rows, err := s.sql.QueryContext(ctx, "SELECT id, buckets FROM items WHERE strategy = ? ORDER BY id", string(strategy))
	if err != nil {
		return nil, dbError("list "+string(strategy)+" items", err)
	}
	defer rows.Close()
	var out []ItemBuckets
	for rows.Next() {
		var ib ItemBuckets
		if err := rows.Scan(&ib.ID, &ib.Buckets); err != nil {
			return nil, dbError("list "+string(strategy)+" items", err)
		}
		ib.Buckets = max(1, ib.Buckets)
		out = append(out, ib)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("list "+string(strategy)+" items", err)
	}
	return out, nil
}

// SetStock changes an item's stock to n in one transaction that holds the
// item's row lock (and a bucketed item's bucket rows', the change spread
// over them: see respreadStock), and returns the item before and after. It refuses n
// below sold (stock.ErrStockBelowSold), by a check and by the UPDATE's
// condition. locked, when not nil, runs with the row locked and the old
// item in hand, before the UPDATE (the shop writes the Redis gate there);
// an error from it rolls the change back.
func (s *Store) SetStock(ctx context.Context, id, n int64, locked func(old *stock.Item) error) (before, after *stock.Item, err error) {
	err = s.inTx(ctx, nil, func(tx *sql.Tx) error {
		q := "SELECT name, price_cents, stock, sold, strategy, buckets, starts_at, ends_at, created_at, updated_at FROM items WHERE id = ?"
		if !s.sqlite {
			q += " FOR UPDATE"
		}
		row := itemRow{ID: id}
		err := tx.QueryRowContext(ctx, q, id).Scan(&row.Name, &row.PriceCents, &row.Stock, &row.Sold, &row.Strategy, &row.Buckets,
			&row.StartsAt, &row.EndsAt, &row.CreatedAt, &row.UpdatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
		}
		if err != nil {
			return dbError("lock item", err)
		}
		var rows []bucketRow
		if row.Buckets > 1 {
			// Orders of a bucketed item lock their bucket rows, not the
			// items row: hold them all too (ascending, after the items row).
			if rows, err = s.lockBucketRows(ctx, tx, id); err != nil {
				return err
			}
			row.Sold = 0
			var total int64
			for _, r := range rows {
				row.Sold += r.Sold
				total += r.Stock
			}
			if len(rows) != row.Buckets || total != row.Stock {
				return fmt.Errorf("database: item %d has %d bucket rows holding %d units, want %d rows holding its stock %d",
					id, len(rows), total, row.Buckets, row.Stock)
			}
		}
		before = row.item()
		if n < row.Sold {
			return fmt.Errorf("stock %d is below the %d already sold: %w", n, row.Sold, stock.ErrStockBelowSold)
		}
		if locked != nil {
			if err := locked(before); err != nil {
				return err
			}
		}
		now := Now()
		if row.Buckets > 1 {
			if err := respreadStock(ctx, tx, id, rows, n); err != nil {
				return err
			}
		}
		// A bucketed item's items.sold is not kept (it is 0): the rows'
		// CHECK and the sum checked above guard its cut.
		res, err := tx.ExecContext(ctx, "UPDATE items SET stock = ?, updated_at = ? WHERE id = ? AND (buckets > 1 OR sold <= ?)", n, now, id, n)
		if err != nil {
			return dbError("update stock", err)
		}
		if changed, err := oneRow(res, "update stock"); err != nil {
			return err
		} else if !changed {
			return fmt.Errorf("stock %d is below sold: %w", n, stock.ErrStockBelowSold)
		}
		row.Stock, row.UpdatedAt = n, now
		after = row.item()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// LockFence reads the highest lock fence the item's row has accepted.
func (s *Store) LockFence(ctx context.Context, itemID int64) (int64, error) {
	var fence int64
	err := s.sql.QueryRowContext(ctx, "SELECT lock_fence FROM items WHERE id = ?", itemID).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	}
	if err != nil {
		return 0, dbError("read lock fence", err)
	}
	return fence, nil
}

// oneRow reads whether a conditional UPDATE of one row changed it.
func oneRow(res sql.Result, op string) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, dbError(op, err)
	}
	return n == 1, nil
}
