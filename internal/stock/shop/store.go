package shop

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/seckill/seckill/internal/stock"
)

// Store is the source of truth: items and orders in MySQL or SQLite.
type Store struct {
	db  *gorm.DB
	sql *sql.DB // the hot path, without gorm's per-call work

	// paymentTimeout is how long after its sale an order may be paid; zero:
	// forever. NewService sets it from its Config before any use.
	paymentTimeout time.Duration
}

// NewStore wraps an open gorm handle whose schema is migrated.
func NewStore(db *gorm.DB) *Store {
	sqlDB, _ := db.DB()
	return &Store{db: db, sql: sqlDB}
}

type itemRow struct {
	ID         int64 `gorm:"primaryKey"`
	Name       string
	PriceCents int64
	Stock      int64
	Sold       int64
	Strategy   stock.StrategyName
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
		Strategy: r.Strategy, StartsAt: utcPtr(r.StartsAt), EndsAt: utcPtr(r.EndsAt),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

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

// deadline is the payment deadline of an order sold at now, nil for none.
func (s *Store) deadline(now time.Time) *time.Time {
	if s.paymentTimeout <= 0 {
		return nil
	}
	d := now.Add(s.paymentTimeout)
	return &d
}

// created fills in what the database holds for an order just written at now.
func (s *Store) created(o *stock.Order, now time.Time) {
	o.Status, o.ExpiresAt, o.CreatedAt, o.UpdatedAt = stock.StatusCreated, s.deadline(now), now, now
}

// dbNow is the current time at the precision DATETIME(6) keeps, so what a
// 201 answer says equals what a later read returns.
func dbNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateItem inserts it and fills in its id and timestamps.
func (s *Store) CreateItem(ctx context.Context, it *stock.Item) error {
	now := dbNow()
	row := itemRow{Name: it.Name, PriceCents: it.PriceCents, Stock: it.Stock, Strategy: it.Strategy,
		StartsAt: utcPtr(it.StartsAt), EndsAt: utcPtr(it.EndsAt), CreatedAt: now, UpdatedAt: now}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return dbError("create item", err)
	}
	*it = *row.item()
	return nil
}

// Item reads one item; ErrNotFound when there is none.
func (s *Store) Item(ctx context.Context, id int64) (*stock.Item, error) {
	var row itemRow
	err := s.db.WithContext(ctx).Take(&row, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("read item", err)
	}
	return row.item(), nil
}

// SetStock changes an item's stock to n inside one transaction. before,
// when not nil, runs with the row locked and the old item in hand, before
// the write; an error from it rolls the change back. It refuses n below
// sold.
func (s *Store) SetStock(ctx context.Context, id, n int64, before func(old *stock.Item) error) (old, updated *stock.Item, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row itemRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&row, id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
		}
		if err != nil {
			return dbError("lock item", err)
		}
		old = row.item()
		if n < row.Sold {
			return fmt.Errorf("stock %d is below the %d already sold: %w", n, row.Sold, stock.ErrStockBelowSold)
		}
		if before != nil {
			if err := before(old); err != nil {
				return err
			}
		}
		now := dbNow()
		res := tx.Exec("UPDATE items SET stock = ?, updated_at = ? WHERE id = ? AND sold <= ?", n, now, id, n)
		if res.Error != nil {
			return dbError("update stock", res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("stock %d is below sold: %w", n, stock.ErrStockBelowSold)
		}
		row.Stock, row.UpdatedAt = n, now
		updated = row.item()
		return nil
	})
	if err != nil {
		return nil, nil, txError(err)
	}
	return old, updated, nil
}

// errFenceStale means a lock holder's fencing token is older than the last
// one that wrote the item: its lock expired and somebody else took it.
var errFenceStale = errors.New("lock lost: a newer fencing token has written this item")

// InsertOrder writes o and takes one unit of its item in one transaction.
// The UPDATE's WHERE clause is what makes oversell impossible; rows affected
// is checked. fence, when positive, must be no older than the item's last
// fence: the same lease may write many times, an older one never again.
// The order row goes first so the hot items row is locked for as short a
// time as possible.
func (s *Store) InsertOrder(ctx context.Context, o *stock.Order, idemKey string, fence int64) error {
	now := dbNow()
	var key *string
	if idemKey != "" {
		key = &idemKey
	}
	if err := s.insertOrder(ctx, o, key, fence, now); err != nil {
		return txError(err)
	}
	s.created(o, now)
	return nil
}

func (s *Store) insertOrder(ctx context.Context, o *stock.Order, key *string, fence int64, now time.Time) (err error) {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return dbError("begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	_, err = tx.ExecContext(ctx, "INSERT INTO orders (id, item_id, user_id, status, idempotency_key, expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		o.ID, o.ItemID, o.UserID, stock.StatusCreated, key, s.deadline(now), now, now)
	if err != nil {
		return insertError(err)
	}
	var res sql.Result
	if fence > 0 {
		res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold + 1, lock_fence = ?, updated_at = ? WHERE id = ? AND sold < stock AND lock_fence <= ?",
			fence, now, o.ItemID, fence)
	} else {
		res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold + 1, updated_at = ? WHERE id = ? AND sold < stock", now, o.ItemID)
	}
	if err != nil {
		return dbError("take unit", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return dbError("take unit", err)
	}
	if n != 1 {
		return s.whyNotTaken(ctx, tx, o.ItemID, fence)
	}
	if err = tx.Commit(); err != nil {
		return dbError("commit", err)
	}
	return nil
}

// whyNotTaken tells, inside the failed transaction, why no unit was taken.
func (s *Store) whyNotTaken(ctx context.Context, tx *sql.Tx, itemID, fence int64) error {
	var sold, units, lastFence int64
	err := tx.QueryRowContext(ctx, "SELECT sold, stock, lock_fence FROM items WHERE id = ?", itemID).Scan(&sold, &units, &lastFence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	case err != nil:
		return dbError("read item", err)
	case sold >= units:
		return stock.ErrSoldOut
	case fence > 0 && lastFence > fence:
		return fmt.Errorf("fence %d, item has %d: %w: %w", fence, lastFence, errFenceStale, stock.ErrUnavailable)
	}
	return fmt.Errorf("item %d: unexpected zero rows updated", itemID)
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

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return dbError("ping", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return dbError("ping", err)
	}
	return nil
}

// insertError turns a unique-key violation into the domain error it means,
// judged by which key clashed.
func insertError(err error) error {
	switch index, _ := uniqueViolation(err); index {
	case "orders_item_idem":
		return stock.ErrIdempotencyConflict
	case "orders_item_user":
		return stock.ErrAlreadyPurchased
	}
	return dbError("insert order", err)
}

// isDupKey reports a unique-key violation of any key.
func isDupKey(err error) bool {
	_, ok := uniqueViolation(err)
	return ok
}

// uniqueViolation reports whether err is a unique-key violation and names
// the key, as the MySQL schema names it ("orders_item_user", "PRIMARY"; ""
// when unknown). It goes by the driver's error code and the key's name,
// never by searching the message: MySQL's quotes the clashing values, which
// hold a user id and an Idempotency-Key.
func uniqueViolation(err error) (index string, ok bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		if me.Number != mysqlDupEntry {
			return "", false
		}
		return mysqlDupIndex(me.Message), true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return "PRIMARY", true
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return sqliteUniqueIndex[sqliteConstraintColumns(se.Error())], true
		}
	}
	return "", false
}

// mysqlDupEntry is ER_DUP_ENTRY: "Duplicate entry '%s' for key '%s'".
const mysqlDupEntry = 1062

// mysqlDupIndex reads the key's name from ER_DUP_ENTRY's message. The name
// is the message's last quoted part, after the entry, so the last
// " for key '" is the server's even when the entry contains the words;
// MySQL 8 writes it "table.index".
func mysqlDupIndex(msg string) string {
	i := strings.LastIndex(msg, " for key '")
	if i < 0 {
		return ""
	}
	name := strings.TrimSuffix(msg[i+len(" for key '"):], "'")
	if _, after, found := strings.Cut(name, "."); found {
		name = after
	}
	return name
}

// sqliteUniqueIndex names SQLite's UNIQUE constraints, which its messages
// identify by their columns, as the MySQL schema names the same keys.
var sqliteUniqueIndex = map[string]string{
	"orders.item_id, orders.user_id":         "orders_item_user",
	"orders.item_id, orders.idempotency_key": "orders_item_idem",
}

// sqliteConstraintColumns reads the columns from a UNIQUE violation's
// message, "... UNIQUE constraint failed: t.a, t.b (2067)". SQLite builds
// it from the schema alone; it holds no value.
func sqliteConstraintColumns(msg string) string {
	const marker = "UNIQUE constraint failed: "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return ""
	}
	cols := msg[i+len(marker):]
	if j := strings.LastIndex(cols, " ("); j >= 0 {
		cols = cols[:j]
	}
	return cols
}

// domainErrors are outcomes a transaction reports on purpose.
var domainErrors = []error{stock.ErrNotFound, stock.ErrInvalid, stock.ErrSoldOut, stock.ErrAlreadyPurchased, stock.ErrStockBelowSold,
	stock.ErrIdempotencyConflict, stock.ErrUnavailable, stock.ErrSaleNotStarted, stock.ErrSaleEnded,
	stock.ErrOrderPaid, stock.ErrOrderCancelled, stock.ErrOrderExpired, stock.ErrOrderPending}

// txError classifies what a transaction returned: its own outcomes pass
// through, and a failure of BEGIN or COMMIT is classified like any other.
func txError(err error) error {
	for _, d := range domainErrors {
		if errors.Is(err, d) {
			return err
		}
	}
	return dbError("transaction", err)
}

// dbError wraps err, and marks it ErrUnavailable when it says the database
// could not be reached or did not answer in time, rather than that the
// request was wrong.
func dbError(op string, err error) error {
	if isOutage(err) {
		return fmt.Errorf("database: %s: %w: %w", op, stock.ErrUnavailable, err)
	}
	return fmt.Errorf("database: %s: %w", op, err)
}

func isOutage(err error) bool {
	var ne net.Error
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, sql.ErrConnDone), errors.As(err, &ne):
		return true
	case errors.As(err, &me):
		switch me.Number {
		case 1040, 1053, 1205, 1213, 1927, 2002, 2003, 2006, 2013:
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "database is locked") ||
		strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "i/o timeout")
}
