package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// On a Galera cluster GET_LOCK is node-local: node2 grants the lock node1
// holds (measured), so two processes pointed at different nodes would
// migrate at once. There the migration lock is a lease row instead, in a
// table of its own: Galera replicates and certifies its UPDATE like any
// other write, so of two nodes taking it at once one commits and the other
// fails certification (1213) or finds it taken.
//
// A lease, not a held session: a process that dies holding it blocks the
// others until it expires (leaseTTL), where GET_LOCK would free it with the
// connection. The holder renews it every leaseTTL/3 while it migrates; one
// stalled past leaseTTL (a frozen process) can lose it to another, which
// the renewal notices and the release reports.
const (
	leaseTTL  = 30 * time.Second
	leasePoll = 250 * time.Millisecond
)

const leaseTable = "seckill_migration_lock"

// galera reports whether conn's server is a Galera node (wsrep_on). A
// server without the variable (MySQL) is not.
func galera(ctx context.Context, conn *sql.Conn) bool {
	var on sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on); err != nil {
		return false
	}
	return on.Valid && (on.String == "1" || on.String == "ON")
}

// leaseLock is the migration lock on Galera: holder's lease row.
type leaseLock struct {
	conn     *sql.Conn
	holder   string
	syncWait sql.NullInt64 // the session's wsrep_sync_wait before lock
	stop     chan struct{}
	done     chan error // the renewal's end: nil, or why the lease was lost
}

func newLeaseLock(conn *sql.Conn) *leaseLock {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &leaseLock{conn: conn, holder: hex.EncodeToString(b[:])}
}

// lock takes the lease within wait (ctx permitting), then renews it until
// unlock.
func (l *leaseLock) lock(ctx context.Context, wait time.Duration) (err error) {
	// Each statement on the lease first waits until this node has applied
	// what the cluster committed before it (reads, UPDATE, INSERT: 1|2|4),
	// so a lease freed on another node a moment ago is seen free here. The
	// session's own setting comes back with unlock (the connection returns
	// to its pool).
	if err := l.conn.QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait").Scan(&l.syncWait); err != nil {
		return fmt.Errorf("migrations: the session's wsrep_sync_wait: %w", err)
	}
	if _, err := l.conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 7"); err != nil {
		return fmt.Errorf("migrations: wsrep_sync_wait for the migration lock: %w", err)
	}
	defer func() {
		if err != nil { // not taken: the connection goes back to its pool as it came
			err = errors.Join(err, l.restore(context.WithoutCancel(ctx)))
		}
	}()
	if _, err := l.conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+leaseTable+
		" (id TINYINT PRIMARY KEY, holder VARCHAR(32) NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"); err != nil {
		return fmt.Errorf("migrations: the migration lock's table: %w", err)
	}
	if _, err := l.conn.ExecContext(ctx, "INSERT IGNORE INTO "+leaseTable+" VALUES (1, '', '1970-01-01')"); err != nil && !certificationFailure(err) {
		return fmt.Errorf("migrations: the migration lock's row: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		got, err := l.try(ctx)
		if err != nil {
			return err
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("migrations: another process held the migration lock for %s", wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migrations: take the migration lock: %w", ctx.Err())
		case <-time.After(leasePoll):
		}
	}
	l.stop, l.done = make(chan struct{}), make(chan error, 1)
	go l.renew()
	return nil
}

// try takes the lease if it is free or expired: one UPDATE, whose rows
// say whether it did. A certification failure is another node's take
// ordered first: not taken.
func (l *leaseLock) try(ctx context.Context) (bool, error) {
	res, err := l.conn.ExecContext(ctx, "UPDATE "+leaseTable+
		" SET holder = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND"+
		" WHERE id = 1 AND (holder = '' OR expires_at < UTC_TIMESTAMP(6))", l.holder, leaseTTL.Microseconds())
	if certificationFailure(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrations: take the migration lock: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (l *leaseLock) renew() {
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			l.done <- nil
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaseTTL/3)
		res, err := l.conn.ExecContext(ctx, "UPDATE "+leaseTable+
			" SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = 1 AND holder = ?", leaseTTL.Microseconds(), l.holder)
		cancel()
		if err != nil {
			continue // the next renewal may get through; the lease lasts leaseTTL
		}
		if n, _ := res.RowsAffected(); n == 0 {
			l.done <- errors.New("migrations: the migration lock's lease expired while migrating, and another process may have taken it")
			<-l.stop
			return
		}
	}
}

// unlock stops the renewal and frees the lease.
func (l *leaseLock) unlock(ctx context.Context) error {
	close(l.stop)
	lost := <-l.done
	_, err := l.conn.ExecContext(ctx, "UPDATE "+leaseTable+" SET holder = '', expires_at = '1970-01-01' WHERE id = 1 AND holder = ?", l.holder)
	if err != nil {
		err = fmt.Errorf("migrations: release the migration lock: %w", err)
	}
	return errors.Join(lost, err, l.restore(ctx))
}

// certificationFailure: Galera refused the transaction at commit for a
// conflicting write-set ordered first (1213, also a local deadlock).
func certificationFailure(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// restore gives the session back its own wsrep_sync_wait.
func (l *leaseLock) restore(ctx context.Context) error {
	if _, err := l.conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wsrep_sync_wait = %d", l.syncWait.Int64)); err != nil {
		return fmt.Errorf("migrations: restore wsrep_sync_wait: %w", err)
	}
	return nil
}
