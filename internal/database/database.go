// Package database opens the source of truth, MySQL/MariaDB or the embedded
// SQLite file, with the settings the service relies on, and migrates it.
// The service and the tests open it the same way.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/glebarez/sqlite"
	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/migrations"
)

// Open opens MySQL when dsn is set, else the embedded SQLite file, and
// applies the migrations not yet applied, returning their versions. It never
// creates the MySQL database itself.
func Open(ctx context.Context, dsn, sqlitePath string) (*gorm.DB, string, []int64, error) {
	gcfg := &gorm.Config{SkipDefaultTransaction: true, Logger: logger.Default.LogMode(logger.Silent)}
	if dsn == "" {
		// _txlock=immediate: a transaction takes the write lock when it
		// begins. A transaction that reads and then writes (a gate rebuild,
		// a cancellation) would otherwise fail with SQLITE_BUSY_SNAPSHOT,
		// which busy_timeout does not retry, when another connection (a
		// second instance on the same file) wrote in between.
		//
		// Opens of one file take turns, from the open to the last migration
		// (instances starting together, or tests sharing a file): goose has
		// no lock of its own on SQLite, and two opens of a new file both
		// applied migration 2 ("duplicate column name"); and switching a new
		// file to WAL while another open does can fail at once with
		// SQLITE_BUSY, which busy_timeout does not retry (seen in CI). The
		// lock is a file of its own beside the database, as SQLite's -wal
		// and -shm are: a descriptor of the database file itself, closed,
		// would drop SQLite's own locks.
		unlock, err := lockFile(sqlitePath + "-migrate-lock")
		if err != nil {
			return nil, "", nil, err
		}
		db, err := gorm.Open(sqlite.Open("file:"+sqlitePath+
			"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"), gcfg)
		if err != nil {
			unlock()
			return nil, "", nil, fmt.Errorf("open sqlite %s: %w", sqlitePath, err)
		}
		sqlDB, _ := db.DB()
		// SQLite has one writer; one connection turns lock contention into a queue.
		sqlDB.SetMaxOpenConns(1)
		applied, err := migrations.Up(ctx, sqlDB, migrations.SQLite)
		unlock()
		if err != nil {
			_ = sqlDB.Close()
			return nil, "", nil, err
		}
		return db, "embedded sqlite " + sqlitePath, applied, nil
	}

	mc, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", nil, fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	if mc.DBName == "" {
		return nil, "", nil, errors.New("SECKILL_MYSQL_DSN names no database; add one, e.g. root@tcp(127.0.0.1:3306)/seckill")
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.InterpolateParams = true // one round trip per statement instead of three
	if mc.Timeout == 0 {
		mc.Timeout = 3 * time.Second // a refused connection still fails at once
	}
	if mc.ReadTimeout == 0 {
		mc.ReadTimeout = 5 * time.Second
	}
	if mc.WriteTimeout == 0 {
		mc.WriteTimeout = 5 * time.Second
	}
	db, err := gorm.Open(mysql.Open(mc.FormatDSN()), gcfg)
	if err != nil {
		return nil, "", nil, mysqlOpenError(mc, err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(64)
	sqlDB.SetMaxIdleConns(64)
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pctx); err != nil {
		_ = sqlDB.Close()
		return nil, "", nil, mysqlOpenError(mc, err)
	}
	if galera(pctx, sqlDB) && mc.Params["wsrep_sync_wait"] == "" {
		// On Galera a node may answer a read before it applied write
		// sets the cluster already committed: after a failover the new
		// writer could miss an order acknowledged on the old one (an
		// Idempotency-Key's replay, a read-back of an unknown COMMIT).
		// wsrep_sync_wait=1 makes every read and BEGIN of a session wait
		// until its node caught up. Writes need no wait: certification
		// refuses one based on a stale row (1213, not written).
		_ = sqlDB.Close()
		if mc.Params == nil {
			mc.Params = map[string]string{}
		}
		mc.Params["wsrep_sync_wait"] = "1"
		if db, err = gorm.Open(mysql.Open(mc.FormatDSN()), gcfg); err != nil {
			return nil, "", nil, mysqlOpenError(mc, err)
		}
		sqlDB, _ = db.DB()
		sqlDB.SetMaxOpenConns(64)
		sqlDB.SetMaxIdleConns(64)
		sqlDB.SetConnMaxLifetime(5 * time.Minute)
	}
	applied, err := migrations.Up(ctx, sqlDB, migrations.MySQL)
	if err != nil {
		_ = sqlDB.Close()
		return nil, "", nil, err
	}
	return db, fmt.Sprintf("mysql %s/%s", mc.Addr, mc.DBName), applied, nil
}

// galera reports whether db is a node of a Galera cluster (wsrep_on), not
// a single server; an error (MySQL has no such variable) says it is not.
func galera(ctx context.Context, db *sql.DB) bool {
	var on sql.NullInt64
	return db.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on) == nil && on.Int64 == 1
}

func mysqlOpenError(mc *gomysql.Config, err error) error {
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == 1049 {
		return fmt.Errorf("database %q does not exist on %s; create it first (CREATE DATABASE `%s`): the service never creates it", mc.DBName, mc.Addr, mc.DBName)
	}
	return fmt.Errorf("mysql at %s: %w", mc.Addr, err)
}
