-- +goose Up
-- The order lifecycle: created -> paid or cancelled. expires_at is the
-- payment deadline (NULL: never), scanned by the sweeper through
-- orders_status_expires. stock_returned_at records that a cancelled order's
-- unit is back in the Redis gate too (or, without a gate, at once); the
-- sweeper finishes the cancelled orders where it is NULL, found through
-- orders_status_returned.
ALTER TABLE orders
    ADD COLUMN expires_at        DATETIME(6) NULL,
    ADD COLUMN stock_returned_at DATETIME(6) NULL,
    ADD INDEX orders_status_expires (status, expires_at),
    ADD INDEX orders_status_returned (status, stock_returned_at);

-- +goose Down
ALTER TABLE orders
    DROP INDEX orders_status_returned,
    DROP INDEX orders_status_expires,
    DROP COLUMN stock_returned_at,
    DROP COLUMN expires_at;
