-- +goose Up
-- Same as migrations/mysql/00011_bucket_lock_fence.sql, in SQLite's dialect.
ALTER TABLE item_stock ADD COLUMN lock_fence INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE item_stock DROP COLUMN lock_fence;
