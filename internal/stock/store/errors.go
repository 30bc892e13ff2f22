package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/seckill/seckill/internal/stock"
)

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

// dbError wraps err, and marks it stock.ErrUnavailable when it says the
// database
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
	var se *sqlite.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, sql.ErrConnDone), errors.As(err, &ne):
		return true
	case errors.As(err, &se) && se.Code() == sqlite3.SQLITE_INTERRUPT:
		// SQLite's answer to a context that ended mid-statement.
		return true
	case errors.As(err, &me):
		switch me.Number {
		case 1040, 1053, 1205, 1213, 1927, 2002, 2003, 2006, 2013:
			return true
		case 1047:
			// ER_UNKNOWN_COM_ERROR, Galera's "WSREP has not yet prepared
			// node for application use": a node out of the primary
			// component refuses every statement (nothing ran).
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "database is locked") ||
		strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "i/o timeout")
}

// isDeadlock reports whether err is MySQL's deadlock (1213), whose
// transaction was rolled back whole and may simply run again.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// isLockConflict reports whether err is a deadlock (1213) or a lock wait
// timeout (1205): the statement lost a lock conflict. After either, the
// transactions of bucket rows (an order's, a move's) are rolled back whole
// by inTx and may run again.
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
