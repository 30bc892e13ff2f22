-- +goose Up
-- Same shape as migrations/mysql/00001_init.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS items (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    price_cents INTEGER NOT NULL DEFAULT 0,
    stock       INTEGER NOT NULL,
    sold        INTEGER NOT NULL DEFAULT 0,
    strategy    TEXT    NOT NULL,
    lock_fence  INTEGER NOT NULL DEFAULT 0,
    starts_at   DATETIME NULL,
    ends_at     DATETIME NULL,
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL,
    CONSTRAINT items_sold_range CHECK (sold >= 0 AND sold <= stock)
);

CREATE TABLE IF NOT EXISTS orders (
    id              TEXT    NOT NULL PRIMARY KEY,
    item_id         INTEGER NOT NULL,
    user_id         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    idempotency_key TEXT    NULL,
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    CONSTRAINT orders_item_user UNIQUE (item_id, user_id),
    CONSTRAINT orders_item_idem UNIQUE (item_id, idempotency_key)
);

-- +goose Down
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS items;
