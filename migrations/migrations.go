// Package migrations holds the versioned schema, one folder per SQL dialect,
// and applies it with goose. Applying is idempotent: goose records each
// version it ran in goose_db_version and skips it next time.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a folder of migrations.
type Dialect string

const (
	MySQL  Dialect = "mysql"
	SQLite Dialect = "sqlite"
)

// Up applies every migration not yet applied and returns the versions it
// ran. On MySQL, processes that start together take turns (see mysqlLock).
func Up(ctx context.Context, db *sql.DB, d Dialect) (_ []int64, err error) {
	p, err := provider(db, d)
	if err != nil {
		return nil, err
	}
	if d == MySQL {
		// The lock is held around all of goose's work, not handed to goose
		// as its session locker: goose checks for pending migrations, and
		// creates its version table, before it takes that lock, and on
		// MySQL the table's CREATE commits before its zero row is written,
		// so a process starting beside another could find the table empty
		// ("missing zero version migration"; TestConcurrentUpOnOneDatabase).
		unlock, lerr := lockMigrations(ctx, db)
		if lerr != nil {
			return nil, lerr
		}
		defer func() {
			if uerr := unlock(); uerr != nil && err == nil {
				err = uerr
			}
		}()
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// provider is goose for dialect d's migrations on db.
func provider(db *sql.DB, d Dialect) (*goose.Provider, error) {
	var gd goose.Dialect
	switch d {
	case MySQL:
		gd = goose.DialectMySQL
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(gd, db, sub, goose.WithGoMigrations(splitBucketRows))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Fingerprint is a digest of dialect d's migrations, their files' names and
// contents: a schema built by them is the same while it is. (The Go
// migration only moves rows, so its code does not change a schema.)
// Tests keep a migrated template database per fingerprint (testenv).
func Fingerprint(d Dialect) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(files, string(d), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("migrations: %w", err)
	}
	fmt.Fprintf(h, "go %d\n", splitBucketRows.Version)
	return hex.EncodeToString(h.Sum(nil)), nil
}
