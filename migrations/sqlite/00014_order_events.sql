-- +goose Up
-- Same as migrations/mysql/00014_order_events.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS order_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT     NOT NULL UNIQUE,
    type         TEXT     NOT NULL,
    order_id     TEXT     NOT NULL,
    item_id      INTEGER  NOT NULL,
    user_id      TEXT     NOT NULL,
    status       TEXT     NOT NULL,
    at           DATETIME NOT NULL,
    published_at DATETIME NULL,
    pub_seq      INTEGER  NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS order_events_order ON order_events (order_id);

-- +goose Down
DROP TABLE IF EXISTS order_events;
