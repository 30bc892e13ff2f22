-- +goose Up
-- Same as migrations/mysql/00009_item_stock.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS item_stock (
    item_id INTEGER NOT NULL,
    bucket  INTEGER NOT NULL,
    stock   INTEGER NOT NULL,
    sold    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (item_id, bucket),
    CONSTRAINT item_stock_sold_range CHECK (sold >= 0 AND sold <= stock)
);

-- +goose Down
DROP TABLE IF EXISTS item_stock;
