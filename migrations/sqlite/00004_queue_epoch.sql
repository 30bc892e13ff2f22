-- +goose Up
-- Same as migrations/mysql/00004_queue_epoch.sql, in SQLite's dialect.
ALTER TABLE items ADD COLUMN queue_epoch INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE items DROP COLUMN queue_epoch;
