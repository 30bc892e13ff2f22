-- +goose Up
-- item_stock: the stock of an item with buckets > 1, one row per bucket
-- (docs/DESIGN.md, "Bucket rows"). An order takes its unit from the row of
-- its buyer's home bucket, so K orders of one hot item commit on K rows.
-- The item's stock is the sum of its rows' stock (items.stock holds it too),
-- its sold the sum of their sold (items.sold is not kept for such an item).
-- An item with one bucket has no rows here: its items row is its stock.
CREATE TABLE IF NOT EXISTS item_stock (
    item_id BIGINT NOT NULL,
    bucket  INT    NOT NULL,
    stock   BIGINT NOT NULL,
    sold    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (item_id, bucket),
    CONSTRAINT item_stock_sold_range CHECK (sold >= 0 AND sold <= stock)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS item_stock;
