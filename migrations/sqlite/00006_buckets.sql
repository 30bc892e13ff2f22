-- +goose Up
-- Same as migrations/mysql/00006_buckets.sql, in SQLite's dialect.
ALTER TABLE items ADD COLUMN buckets INTEGER NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE items DROP COLUMN buckets;
