package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/internal/stock"
)

// Whether an item has a waiting room is a row of item_rooms (the rooms
// package owns its columns). The database is the last word on it: an order
// without a pass takes a unit only where the UPDATE that takes it finds no
// such row (noRoom), in the order's own transaction, so a room whose
// change committed before an order's transaction began refuses the order
// on every instance, whatever each one's memory of the rooms says.

// noRoom extends the UPDATE that takes an order's units (one more
// argument: the item id). It is a primary-key probe inside a statement that
// runs anyway: no round trip. InnoDB reads it with a shared lock, so a room
// being turned on waits for the order, or the order for the room.
const noRoom = " AND NOT EXISTS (SELECT 1 FROM item_rooms WHERE item_id = ?)"

// roomExists is a column: whether the item (one argument: its id) has a
// waiting room.
const roomExists = "EXISTS (SELECT 1 FROM item_rooms WHERE item_id = ?)"

// Remaining reads stock - sold (a bucketed item's: summed over its rows), and whether the item has a waiting room.
func (s *Store) Remaining(ctx context.Context, itemID int64) (left int64, roomed bool, err error) {
	err = s.sql.QueryRowContext(ctx, "SELECT stock - "+soldOf+", "+roomExists+" FROM items WHERE id = ?", itemID, itemID).Scan(&left, &roomed)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	}
	if err != nil {
		return 0, false, dbError("read remaining", err)
	}
	return left, roomed, nil
}

// Roomed reads whether the item has a waiting room.
func (s *Store) Roomed(ctx context.Context, itemID int64) (bool, error) {
	var roomed bool
	if err := s.sql.QueryRowContext(ctx, "SELECT "+roomExists, itemID).Scan(&roomed); err != nil {
		return false, dbError("read waiting room", err)
	}
	return roomed, nil
}

// WithItem is a write that goes into the transaction of an item's
// creation or of a change of its waiting room (see CreateItem,
// ChangeRoom): tx is that transaction, id the item's.
type WithItem func(ctx context.Context, tx *gorm.DB, id int64) error

// ChangeRoom runs write in one transaction holding the item's row lock,
// then marked (when not nil) with whether the item has a waiting room once
// write is done, still inside the lock, and commits if both return nil.
// Every gate build holds the same lock, so a room's marker set by marked is
// never overwritten by a build that read the database before the change.
func (s *Store) ChangeRoom(ctx context.Context, id int64, write WithItem, marked func(ctx context.Context, roomed bool) error) error {
	var inner error // the callbacks' and the lock's, classified where they ran
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		inner = s.changeRoomIn(ctx, tx, id, write, marked)
		return inner
	})
	if err != nil && inner == nil {
		return dbError("change waiting room", err) // BEGIN or COMMIT
	}
	return err
}

func (s *Store) changeRoomIn(ctx context.Context, tx *gorm.DB, id int64, write WithItem, marked func(ctx context.Context, roomed bool) error) error {
	var row itemRow
	q := tx.Select("id", "buckets")
	if !s.sqlite {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if err := q.Take(&row, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
		}
		return dbError("lock item", err)
	}
	if row.Buckets > 1 {
		if _, err := s.lockBucketRows(ctx, gormQuerier{tx}, id); err != nil {
			return err
		}
	}
	if err := write(ctx, tx, id); err != nil {
		return err
	}
	if marked == nil {
		return nil
	}
	var roomed bool
	if err := tx.Raw("SELECT "+roomExists, id).Scan(&roomed).Error; err != nil {
		return dbError("read waiting room", err)
	}
	return marked(ctx, roomed)
}
