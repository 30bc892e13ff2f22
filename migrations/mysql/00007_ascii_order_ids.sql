-- +goose Up
-- Order ids are UUIDs, 36 ASCII characters, lower case (the service writes
-- them so, and the API accepts only that form: stock.ValidOrderID). In the
-- table's default character set, utf8mb4, a CHAR(36) key is stored and
-- compared as up to 144 bytes under a case-folding collation, in the
-- primary key and again in every secondary index entry, which all carry
-- the primary key. ASCII with a binary collation makes it 36 bytes
-- compared as bytes: the writers' INSERT costs MariaDB about a fifth less
-- CPU per order (docs/BENCHMARKS.md, issue 12). Every stored id is already
-- lower-case ASCII, so no two can collide under the new collation. The
-- ALTER copies the tables: run it outside a sale.
ALTER TABLE orders
    MODIFY id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE order_failures
    MODIFY id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;

-- +goose Down
ALTER TABLE order_failures
    MODIFY id CHAR(36) CHARACTER SET utf8mb4 NOT NULL;
ALTER TABLE orders
    MODIFY id CHAR(36) CHARACTER SET utf8mb4 NOT NULL;
