package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// A test's new database starts with the schema already in it, copied from
// a template the migrations built, instead of running the migrations again
// on every database. The service still runs them at each start (database.Open),
// and finds nothing to apply. Under -race the migrations cost each new
// database about 120-140 ms of the test process's CPU (goose parses each
// file with 4 MB scan buffers, which the race detector zeroes and tracks)
// and MariaDB a dozen DDL statements with their fsyncs; a run of the
// README's command makes about 300 databases of each kind.
//
// The SQLite template is a file migrated once per test process and copied.
// The MariaDB template is a database, seckill_tmpl_<digest of the
// migrations>, made once and kept for later runs (a change to the
// migrations makes a new one; DROP DATABASE the old ones at will); each
// new database gets its tables by SHOW CREATE TABLE of the template's, and
// the template's rows (goose's version table).
//
// The migrations' own tests want empty databases: EmptyDatabases for a
// package, ForEachEmpty for a test.

var emptyDatabases atomic.Bool

// EmptyDatabases makes this process's backends start with empty databases,
// for tests of the migrations themselves. Call it in TestMain, before m.Run.
func EmptyDatabases() { emptyDatabases.Store(true) }

var sqliteTemplate struct {
	once sync.Once
	data []byte
	err  error
}

// writeSQLiteSchema writes the migrated template file at path (schema:
// unless this process wants empty databases).
func writeSQLiteSchema(path string, schema bool) error {
	if !schema || emptyDatabases.Load() {
		return nil
	}
	tp := &sqliteTemplate
	tp.once.Do(func() { tp.data, tp.err = migratedSQLiteFile() })
	if tp.err != nil {
		return tp.err
	}
	return os.WriteFile(path, tp.data, 0o600)
}

// migratedSQLiteFile migrates a new SQLite file and returns its bytes.
func migratedSQLiteFile() ([]byte, error) {
	dir, err := os.MkdirTemp("", "seckill-schema-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "template.db")
	db, _, _, err := database.Open(context.Background(), "", path)
	if err != nil {
		return nil, fmt.Errorf("migrate the sqlite template: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	// The last connection's close checkpoints the WAL into the file.
	if err := sqlDB.Close(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("sqlite template: %s-wal still holds %d bytes after the close", path, fi.Size())
	}
	return os.ReadFile(path)
}

var mysqlTemplate struct {
	once   sync.Once
	name   string
	tables []string // each table's CREATE TABLE, its name a %s for the database
	rows   []string // each non-empty table's name
	err    error
}

// cloneMySQLSchema gives the new database dbName the template's tables and
// rows (schema: unless this process wants empty databases). admin is a connection to the server with no database.
func cloneMySQLSchema(ctx context.Context, admin *sql.DB, base gomysql.Config, dbName string, schema bool) error {
	if !schema || emptyDatabases.Load() {
		return nil
	}
	tp := &mysqlTemplate
	tp.once.Do(func() { tp.err = loadMySQLTemplate(ctx, admin, base) })
	if tp.err != nil {
		return tp.err
	}
	for _, create := range tp.tables {
		if _, err := admin.ExecContext(ctx, fmt.Sprintf(create, "`"+dbName+"`.")); err != nil {
			return fmt.Errorf("copy the schema of %s: %w", tp.name, err)
		}
	}
	for _, t := range tp.rows {
		q := fmt.Sprintf("INSERT INTO `%s`.`%s` SELECT * FROM `%s`.`%s`", dbName, t, tp.name, t)
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("copy the rows of %s.%s: %w", tp.name, t, err)
		}
	}
	return nil
}

// loadMySQLTemplate makes the template database, or completes it (the
// migrations apply what it lacks, processes taking turns as services do),
// and reads its tables.
func loadMySQLTemplate(ctx context.Context, admin *sql.DB, base gomysql.Config) error {
	digest, err := migrations.Fingerprint(migrations.MySQL)
	if err != nil {
		return err
	}
	tp := &mysqlTemplate
	tp.name = "seckill_tmpl_" + digest[:12]
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+tp.name+"`"); err != nil {
		return fmt.Errorf("create the template database: %w", err)
	}
	dsn := base
	dsn.DBName = tp.name
	db, _, _, err := database.Open(ctx, dsn.FormatDSN(), "")
	if err != nil {
		return fmt.Errorf("migrate the template database %s: %w", tp.name, err)
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
	rows, err := admin.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", tp.name)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			_ = rows.Close()
			return err
		}
		names = append(names, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("template database %s has no tables", tp.name)
	}
	for _, n := range names {
		var name, create string
		if err := admin.QueryRowContext(ctx, fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", tp.name, n)).Scan(&name, &create); err != nil {
			return err
		}
		head := "CREATE TABLE `" + n + "`"
		if !strings.HasPrefix(create, head) {
			return fmt.Errorf("SHOW CREATE TABLE %s.%s: unexpected %.60q", tp.name, n, create)
		}
		tp.tables = append(tp.tables, "CREATE TABLE %s`"+n+"`"+strings.ReplaceAll(create[len(head):], "%", "%%"))
		var count int64
		if err := admin.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM `%s`.`%s`", tp.name, n)).Scan(&count); err != nil {
			return err
		}
		if count > 0 {
			tp.rows = append(tp.rows, n)
		}
	}
	return nil
}
