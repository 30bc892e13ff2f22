-- +goose Up
-- order_failures: lua-async orders that were admitted (answered 202) but
-- that the database refused when their writer came to them. That can only
-- happen after Redis lost data; the row records the outcome for GET and for
-- the writers, which treat a failed order as done.
CREATE TABLE IF NOT EXISTS order_failures (
    id              CHAR(36)     NOT NULL PRIMARY KEY,
    item_id         BIGINT       NOT NULL,
    user_id         VARCHAR(64)  NOT NULL,
    idempotency_key VARCHAR(128) NULL,
    reason          VARCHAR(32)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    failed_at       DATETIME(6)  NOT NULL,
    KEY order_failures_item (item_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS order_failures;
