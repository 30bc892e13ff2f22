package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
)

type orderRow struct {
	ID              string `gorm:"primaryKey"`
	ItemID          int64
	UserID          string
	Status          string
	IdempotencyKey  *string
	ExpiresAt       *time.Time
	StockReturnedAt *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (orderRow) TableName() string { return "orders" }

func (r *orderRow) order() *stock.Order {
	return &stock.Order{ID: r.ID, ItemID: r.ItemID, UserID: r.UserID, Status: r.Status, ExpiresAt: utcPtr(r.ExpiresAt),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// insertOrders is the one INSERT of new orders; orderValues gives each
// row's values, in this column order.
const insertOrders = "INSERT INTO orders (id, item_id, user_id, status, idempotency_key, expires_at, created_at, updated_at) VALUES "

// orderValues appends one created order's row to args. key "" is NULL.
func orderValues(args []any, id string, itemID int64, userID, key string, expires *time.Time, created, now time.Time) []any {
	var k *string
	if key != "" {
		k = &key
	}
	return append(args, id, itemID, userID, stock.StatusCreated, k, expires, created, now)
}

// orderColumns is how many values orderValues appends.
const orderColumns = 8

// ErrFenceStale means a lock holder's fencing token is older than the last
// one that wrote the item: its lock expired and somebody else took it, or
// Redis's fence counter lags the database (a replica promoted before the
// last INCRs reached it). The write was refused inside its transaction,
// which rolled back: nothing was written.
var ErrFenceStale = errors.New("stale lock fence: a newer fencing token has written this item")

// ErrMaybeCommitted marks a write whose outcome is unknown: the database
// stopped answering while the transaction committed (or, on the one-order
// path, somewhere in it), so the order may be in the database although its
// caller hears 503. The lua strategy keeps the reservation until the
// database says which; a retry by the user, or the same Idempotency-Key,
// finds the order if it was committed.
var ErrMaybeCommitted = errors.New("the write may have committed")

// ErrBatchRefused means a batch could not be written whole (a duplicate,
// or less stock left than orders); nothing of it was written.
var ErrBatchRefused = errors.New("batch refused")

// OrderWrite is one order to insert, with the Idempotency-Key it was
// placed with ("" for none).
type OrderWrite struct {
	Order *stock.Order
	Key   string
	// Pass: the order carries a verified waiting-room pass
	// (stock.OrderRequest.Pass); without one, an item whose room is on
	// refuses it.
	Pass bool
	// Buckets is the item's bucket count (stock.Item.Buckets): above 1,
	// the order takes its unit from its buyer's home bucket row
	// (item_stock), not from the items row. 0 means 1.
	Buckets int
}

// InsertOrder writes w's order and takes one unit of its item in one
// transaction. The UPDATE's WHERE clause is what makes oversell impossible;
// rows affected is checked. fence, when positive, must be no older than the
// item's last fence: the same lease may write many times, an older one never
// again. An order without a pass (w.Pass false) takes no unit of an item
// whose waiting room is on (stock.ErrPassRequired): the same UPDATE checks
// item_rooms. The order row goes first so the hot items row is locked for
// as short a time as possible. An order of an item with several buckets
// (w.Buckets > 1) takes its unit from its buyer's home bucket row instead,
// moving units to that row when it has none (insertBucketed); it is told
// stock.ErrSoldOut only when no row has a free unit. Its fence is then
// checked against, and stored in, that bucket row's lock_fence.
func (s *Store) InsertOrder(ctx context.Context, w OrderWrite, fence int64) error {
	o := w.Order
	now := Now()
	if w.Buckets > 1 {
		if err := s.insertBucketed(ctx, []OrderWrite{w}, stock.HomeBucketOf(o.UserID, w.Buckets), now, fence, func() {}, true); err != nil {
			return err
		}
		s.Created(o, now)
		return nil
	}
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insertOrders+rowsOf(1, orderColumns), orderValues(nil, o.ID, o.ItemID, o.UserID, w.Key, s.deadline(now), now, now)...)
		if err != nil {
			return insertError(err)
		}
		if err := s.appendEvents(ctx, tx, createdEvents([]OrderWrite{w}, now)...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, takeUnits(fence > 0, !w.Pass), takeArgs(1, fence, now, o.ItemID, !w.Pass)...)
		if err != nil {
			return dbError("take unit", err)
		}
		if taken, err := oneRow(res, "take unit"); err != nil {
			return err
		} else if !taken {
			return whyNotTaken(ctx, tx, o.ItemID, fence, !w.Pass)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Created(o, now)
	return nil
}

// takeUnits is the UPDATE that takes units of an item for orders: sold +
// k <= stock, with a fence no older than the item's when fenced, and no
// waiting room when some order has no pass (roomless). Built once.
func takeUnits(fenced, roomless bool) string { return takeUnitsSQL[b2i(fenced)][b2i(roomless)] }

var takeUnitsSQL = takeSQL("UPDATE items SET sold = sold + ?, updated_at = ?", " WHERE id = ? AND sold + ? <= stock AND buckets <= 1")

// takeSQL builds an UPDATE that takes units in its four forms, indexed
// [fenced][roomless]: set and where, with the fence set and checked when
// fenced, and the waiting-room check when roomless.
func takeSQL(set, where string) (q [2][2]string) {
	for f := range 2 {
		for r := range 2 {
			s := set
			if f == 1 {
				s += ", lock_fence = ?"
			}
			s += where
			if f == 1 {
				s += " AND lock_fence <= ?"
			}
			if r == 1 {
				s += noRoom
			}
			q[f][r] = s
		}
	}
	return q
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// takeArgs are takeUnits' arguments, in its order.
func takeArgs(k int, fence int64, now time.Time, itemID int64, roomless bool) []any {
	args := []any{k, now}
	if fence > 0 {
		args = append(args, fence)
	}
	args = append(args, itemID, k)
	if fence > 0 {
		args = append(args, fence)
	}
	if roomless {
		args = append(args, itemID)
	}
	return args
}

// whyNotTaken tells, inside the failed transaction, why no unit was taken;
// roomless: the order had no pass, so the item's room refuses it.
func whyNotTaken(ctx context.Context, tx *sql.Tx, itemID, fence int64, roomless bool) error {
	var sold, units, lastFence int64
	var roomed bool
	var k int
	err := tx.QueryRowContext(ctx, "SELECT sold, stock, lock_fence, buckets, "+roomExists+" FROM items WHERE id = ?", itemID, itemID).
		Scan(&sold, &units, &lastFence, &k, &roomed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	case err != nil:
		return dbError("read item", err)
	case k > 1:
		return fmt.Errorf("store: item %d has %d buckets: its orders take units from its bucket rows, not its items row", itemID, k)
	case roomless && roomed:
		return fmt.Errorf("item %d: %w", itemID, stock.ErrPassRequired)
	case sold >= units:
		return stock.ErrSoldOut
	case fence > 0 && lastFence > fence:
		return fenceStaleError(fence, lastFence)
	}
	return fmt.Errorf("item %d: unexpected zero rows updated", itemID)
}

// staleFence tells, inside a batch's failed transaction, whether the
// batch's fence is the reason no unit was taken: then the whole batch (and
// any part of it) would be refused again with that fence, and it returns
// the ErrFenceStale error. nil means the batch was refused for another
// reason (settle it order by order).
func staleFence(ctx context.Context, tx *sql.Tx, itemID, fence int64) error {
	if fence <= 0 {
		return nil
	}
	var lastFence int64
	err := tx.QueryRowContext(ctx, "SELECT lock_fence FROM items WHERE id = ?", itemID).Scan(&lastFence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	case err != nil:
		return dbError("read lock fence", err)
	case lastFence > fence:
		return fenceStaleError(fence, lastFence)
	}
	return nil
}

// fenceStaleError is a write refused for its fence: nothing was written
// (the transaction rolled back), so it is a plain, retryable 503.
func fenceStaleError(fence, lastFence int64) error {
	return fmt.Errorf("fence %d, item has %d, nothing written: %w: %w", fence, lastFence, ErrFenceStale, stock.ErrUnavailable)
}

// InsertBatch writes every order of a batch of one item and takes
// len(batch) units in one transaction: the same guard as one order,
// sold + k <= stock (and no waiting room when an order has no pass), with
// rows affected checked. Any refusal rolls the whole batch back:
// ErrFenceStale when fence is older than the item's (no part of the batch
// can be written with it), ErrBatchRefused otherwise. A failed COMMIT is ErrMaybeCommitted.
// A batch of an item with several buckets (all its orders of one home
// bucket, as the shop queues them) takes its units from that bucket's
// row, moving units to it first when it is short (insertBucketed), its
// fence checked against that row's lock_fence.
// progress, when not nil, is called after each statement (the shop's stall
// watch).
func (s *Store) InsertBatch(ctx context.Context, batch []OrderWrite, now time.Time, fence int64, progress func()) error {
	if progress == nil {
		progress = func() {}
	}
	if batch[0].Buckets > 1 {
		b, err := bucketOf(batch)
		if err == nil {
			err = s.insertBucketed(ctx, batch, b, now, fence, progress, false)
		}
		if errors.Is(err, errCommit) {
			return fmt.Errorf("%w: %w", ErrMaybeCommitted, err)
		}
		return err
	}
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		if err := s.insertBatchOrders(ctx, tx, batch, now, progress, false); err != nil {
			return err
		}
		itemID := batch[0].Order.ItemID
		roomless := anyRoomless(batch)
		res, err := tx.ExecContext(ctx, takeUnits(fence > 0, roomless), takeArgs(len(batch), fence, now, itemID, roomless)...)
		progress()
		if err != nil {
			return dbError("take units", err)
		}
		if taken, err := oneRow(res, "take units"); err != nil {
			return err
		} else if !taken {
			if err := staleFence(ctx, tx, itemID, fence); err != nil {
				return err
			}
			return ErrBatchRefused
		}
		if s.takenHook != nil {
			s.takenHook(ctx, tx)
		}
		return nil
	})
	if errors.Is(err, errCommit) {
		return fmt.Errorf("%w: %w", ErrMaybeCommitted, err)
	}
	return err
}

// insertBatchOrders is a batch's one INSERT of its orders, and the one of
// their created events, in tx, with progress called before and after each. A duplicate user or key refuses a
// batch (ErrBatchRefused) and is told by its cause for one order (single).
func (s *Store) insertBatchOrders(ctx context.Context, tx *sql.Tx, batch []OrderWrite, now time.Time, progress func(), single bool) error {
	progress()
	args := make([]any, 0, orderColumns*len(batch))
	deadline := s.deadline(now)
	for _, w := range batch {
		args = orderValues(args, w.Order.ID, w.Order.ItemID, w.Order.UserID, w.Key, deadline, now, now)
	}
	_, err := tx.ExecContext(ctx, insertOrders+rowsOf(len(batch), orderColumns), args...)
	progress()
	if err == nil {
		// The orders' created events, in the same transaction: one
		// multi-row INSERT for the batch.
		err = s.appendEvents(ctx, tx, createdEvents(batch, now)...)
		progress()
		return err
	}
	if e := insertError(err); !single && (errors.Is(e, stock.ErrAlreadyPurchased) || errors.Is(e, stock.ErrIdempotencyConflict)) {
		return ErrBatchRefused
	}
	return insertError(err)
}

// anyRoomless: some order of the batch has no waiting-room pass.
func anyRoomless(batch []OrderWrite) bool {
	for _, w := range batch {
		if !w.Pass {
			return true
		}
	}
	return false
}

// BuyersAmong returns which of users already hold an order for the item.
func (s *Store) BuyersAmong(ctx context.Context, itemID int64, users []string) (map[string]bool, error) {
	args := make([]any, 0, len(users)+1)
	args = append(args, itemID)
	for _, u := range users {
		args = append(args, u)
	}
	q := "SELECT user_id FROM orders WHERE item_id = ? AND user_id IN (" + placeholders(len(users)) + ")"
	rows, err := s.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError("find buyers", err)
	}
	defer rows.Close()
	bought := map[string]bool{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, dbError("find buyers", err)
		}
		bought[u] = true
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("find buyers", err)
	}
	return bought, nil
}

// Order reads one order by id.
func (s *Store) Order(ctx context.Context, id string) (*stock.Order, error) {
	var row orderRow
	err := s.db.WithContext(ctx).Take(&row, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("read order", err)
	}
	return row.order(), nil
}

// OrderOf reads the order a user holds for an item, with the idempotency key
// it was placed with.
func (s *Store) OrderOf(ctx context.Context, itemID int64, userID string) (*stock.Order, string, error) {
	var row orderRow
	err := s.db.WithContext(ctx).Take(&row, "item_id = ? AND user_id = ?", itemID, userID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, "", fmt.Errorf("order of %s for item %d: %w", userID, itemID, stock.ErrNotFound)
	}
	if err != nil {
		return nil, "", dbError("read order", err)
	}
	key := ""
	if row.IdempotencyKey != nil {
		key = *row.IdempotencyKey
	}
	return row.order(), key, nil
}

// KeyedOrder is an order placed under an Idempotency-Key.
type KeyedOrder struct {
	ID, UserID, Key string
	CreatedAt       time.Time
}

// KeyedOrders lists item itemID's orders placed under an Idempotency-Key
// at or after since, whatever their status (a cancelled order still
// answers its key).
func (s *Store) KeyedOrders(ctx context.Context, itemID int64, since time.Time) ([]KeyedOrder, error) {
	var rows []orderRow
	err := s.db.WithContext(ctx).Select("id", "user_id", "idempotency_key", "created_at").
		Where("item_id = ? AND idempotency_key IS NOT NULL AND created_at >= ?", itemID, since.UTC()).Find(&rows).Error
	if err != nil {
		return nil, dbError("list keyed orders", err)
	}
	out := make([]KeyedOrder, 0, len(rows))
	for _, r := range rows {
		out = append(out, KeyedOrder{ID: r.ID, UserID: r.UserID, Key: *r.IdempotencyKey, CreatedAt: r.CreatedAt.UTC()})
	}
	return out, nil
}

func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	return "?" + strings.Repeat(", ?", n-1)
}

// rowsOf is "(?, ..., ?), ..." for n rows of width values.
func rowsOf(n, width int) string {
	row := "(" + placeholders(width) + ")"
	return row + strings.Repeat(", "+row, n-1)
}
