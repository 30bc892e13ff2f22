-- +goose Up
-- Same as migrations/mysql/00012_item_stock_epoch.sql, in SQLite's dialect.
ALTER TABLE item_stock ADD COLUMN queue_epoch INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE item_stock DROP COLUMN queue_epoch;
