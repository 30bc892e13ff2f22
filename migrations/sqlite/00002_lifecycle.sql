-- +goose Up
-- Same shape as migrations/mysql/00002_lifecycle.sql, in SQLite's dialect.
ALTER TABLE orders ADD COLUMN expires_at DATETIME NULL;
ALTER TABLE orders ADD COLUMN stock_returned_at DATETIME NULL;
CREATE INDEX IF NOT EXISTS orders_status_expires ON orders (status, expires_at);
CREATE INDEX IF NOT EXISTS orders_status_returned ON orders (status, stock_returned_at);

-- +goose Down
DROP INDEX IF EXISTS orders_status_returned;
DROP INDEX IF EXISTS orders_status_expires;
ALTER TABLE orders DROP COLUMN stock_returned_at;
ALTER TABLE orders DROP COLUMN expires_at;
