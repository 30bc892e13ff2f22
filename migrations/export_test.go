package migrations

import (
	"context"
	"database/sql"
)

// UpTo applies dialect d's migrations up to and including version.
func UpTo(ctx context.Context, db *sql.DB, d Dialect, version int64) error {
	p, err := provider(db, d)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
