package migrations

import (
	"context"
	"database/sql"
	"time"
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

// Lock takes the migration lock Up takes on db's server within wait (0:
// one try).
func Lock(ctx context.Context, db *sql.DB, wait time.Duration) (unlock func() error, err error) {
	return lockMigrationsWithin(ctx, db, wait)
}
