package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pressly/goose/v3/lock"
)

// lockWait bounds how long a process waits for another one's migrations.
const lockWait = 2 * time.Minute

// mysqlLock makes processes that start together on one MySQL database
// (several instances, a worker, `seckill migrate`) migrate one at a time:
// the first applies what is missing, the others wait, then find nothing
// left to apply. Without it they race, and all but one fail on DDL the
// first has just run ("Duplicate column name"). It is MySQL's named lock
// (GET_LOCK), held by the connection goose migrates on and released with
// it, also when the process dies.
type mysqlLock struct{}

var _ lock.SessionLocker = mysqlLock{}

// lockName is per database (GET_LOCK names are server-wide, 64 characters
// at most).
const lockName = "CONCAT('seckill.migrate.', LEFT(SHA1(DATABASE()), 24))"

func (mysqlLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT GET_LOCK(%s, %d)", lockName, int(lockWait.Seconds()))).Scan(&got)
	switch {
	case err != nil:
		return fmt.Errorf("migrations: take the migration lock: %w", err)
	case !got.Valid || got.Int64 != 1:
		return fmt.Errorf("migrations: another process held the migration lock for %s", lockWait)
	}
	return nil
}

func (mysqlLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK("+lockName+")").Scan(&released); err != nil {
		return fmt.Errorf("migrations: release the migration lock: %w", err)
	}
	if !released.Valid || released.Int64 != 1 {
		return errors.New("migrations: the migration lock was not held at release")
	}
	return nil
}
