-- +goose Up
-- Same shape as migrations/mysql/00003_async.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS order_failures (
    id              TEXT    NOT NULL PRIMARY KEY,
    item_id         INTEGER NOT NULL,
    user_id         TEXT    NOT NULL,
    idempotency_key TEXT    NULL,
    reason          TEXT    NOT NULL,
    created_at      DATETIME NOT NULL,
    failed_at       DATETIME NOT NULL
);
CREATE INDEX IF NOT EXISTS order_failures_item ON order_failures (item_id);

-- +goose Down
DROP TABLE IF EXISTS order_failures;
