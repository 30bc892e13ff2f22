-- +goose Up
-- items: sold can never pass stock; the CHECK is a second guard behind the
-- conditional UPDATE. lock_fence holds the last fencing token that wrote the row.
CREATE TABLE IF NOT EXISTS items (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name        VARCHAR(200) NOT NULL,
    price_cents BIGINT       NOT NULL DEFAULT 0,
    stock       BIGINT       NOT NULL,
    sold        BIGINT       NOT NULL DEFAULT 0,
    strategy    VARCHAR(16)  NOT NULL,
    lock_fence  BIGINT       NOT NULL DEFAULT 0,
    starts_at   DATETIME(6)  NULL,
    ends_at     DATETIME(6)  NULL,
    created_at  DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL,
    CONSTRAINT items_sold_range CHECK (sold >= 0 AND sold <= stock)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- orders: no foreign key on purpose. An FK would take a shared lock on the
-- hot items row at INSERT, and the UPDATE that follows would need to upgrade it.
CREATE TABLE IF NOT EXISTS orders (
    id              CHAR(36)     NOT NULL PRIMARY KEY,
    item_id         BIGINT       NOT NULL,
    user_id         VARCHAR(64)  NOT NULL,
    status          VARCHAR(16)  NOT NULL,
    idempotency_key VARCHAR(128) NULL,
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    UNIQUE KEY orders_item_user (item_id, user_id),
    UNIQUE KEY orders_item_idem (item_id, idempotency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS items;
