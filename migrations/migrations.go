// Package migrations holds the versioned schema, one folder per SQL dialect,
// and applies it with goose. Applying is idempotent: goose records each
// version it ran in goose_db_version and skips it next time.
package migrations

import (
	"context"
	"database/sql"
	"embed"
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

// Up applies every migration not yet applied and returns the versions it ran.
func Up(ctx context.Context, db *sql.DB, d Dialect) ([]int64, error) {
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
	p, err := goose.NewProvider(gd, db, sub)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
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
