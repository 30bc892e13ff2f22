-- +goose Up
-- Same as migrations/mysql/00017_payment_events.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS payment_events (
    event_id    TEXT     NOT NULL PRIMARY KEY,
    type        TEXT     NOT NULL,
    order_id    TEXT     NOT NULL,
    amount      INTEGER  NOT NULL,
    currency    TEXT     NOT NULL,
    outcome     TEXT     NOT NULL,
    reason      TEXT     NOT NULL DEFAULT '',
    received_at DATETIME NOT NULL
);
CREATE INDEX IF NOT EXISTS payment_events_order ON payment_events (order_id);
CREATE INDEX IF NOT EXISTS payment_events_outcome ON payment_events (outcome, received_at);

-- +goose Down
DROP TABLE IF EXISTS payment_events;
