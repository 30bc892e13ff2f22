package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// lockWait bounds how long a process waits for another one's migrations.
const lockWait = 2 * time.Minute

// mysqlLock makes processes that start together on one MySQL database
// (several instances, a worker, `seckill migrate`) migrate one at a time:
// the first applies what is missing, the others wait, then find nothing
// left to apply. Without it they race, and all but one fail on DDL the
// first has just run ("Duplicate column name"). It is MySQL's named lock
// (GET_LOCK), held by a connection of its own for as long as goose works
// and released with it, also when the process dies (lockMigrations). On
// Galera, where GET_LOCK is node-local, it is a lease row (leaseLock).
type mysqlLock struct{ wait time.Duration }

// lockMigrations takes the migration lock on a connection of db's own and
// returns the func that releases it. A connection whose release failed is
// closed, never handed back to the pool with the lock still held.
func lockMigrations(ctx context.Context, db *sql.DB) (unlock func() error, err error) {
	return lockMigrationsWithin(ctx, db, lockWait)
}

// lockMigrationsWithin is lockMigrations waiting at most wait for another
// process's lock (0: one try).
func lockMigrationsWithin(ctx context.Context, db *sql.DB, wait time.Duration) (unlock func() error, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: a connection for the migration lock: %w", err)
	}
	if galera(ctx, conn) {
		return lockGalera(ctx, conn, wait)
	}
	l := mysqlLock{wait: wait}
	if err := l.SessionLock(ctx, conn); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
		return nil, err
	}
	return func() error {
		err := l.SessionUnlock(context.WithoutCancel(ctx), conn)
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return errors.Join(err, conn.Close())
	}, nil
}

// lockName is per database (GET_LOCK names are server-wide, 64 characters
// at most).
const lockName = "CONCAT('seckill.migrate.', LEFT(SHA1(DATABASE()), 24))"

func (l mysqlLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT GET_LOCK(%s, %d)", lockName, int(l.wait.Seconds()))).Scan(&got)
	switch {
	case err != nil:
		return fmt.Errorf("migrations: take the migration lock: %w", err)
	case !got.Valid || got.Int64 != 1:
		return fmt.Errorf("migrations: another process held the migration lock for %s", l.wait)
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

// lockGalera is lockMigrations on a Galera node: the lease row, taken
// within wait on conn, which the returned func releases and closes.
func lockGalera(ctx context.Context, conn *sql.Conn, wait time.Duration) (unlock func() error, err error) {
	l := newLeaseLock(conn)
	if err := l.lock(ctx, wait); err != nil {
		conn.Close()
		return nil, err
	}
	return func() error {
		return errors.Join(l.unlock(context.WithoutCancel(ctx)), conn.Close())
	}, nil
}
