-- +goose Up
-- The transactional outbox of order events (issue 35, docs/DESIGN.md "Order
-- events"): one row per change of an order (created, paid, cancelled,
-- expired, failed, refund_due), written in the same transaction as the
-- change, so a row exists exactly when its change committed. seq orders
-- the rows (an order's later event is written after its earlier one
-- committed, so it has the higher seq); id is the event's id, the
-- Nats-Msg-Id JetStream dedupes on. The relay publishes rows whose pub_seq
-- is NULL in seq order and then sets published_at and pub_seq, the
-- delivery order the admin feed pages by (only one relay marks at a time:
-- it holds the database's outbox lock). The unique index on pub_seq also
-- finds the unpublished rows (NULLs first, in seq order).
CREATE TABLE IF NOT EXISTS order_events (
    seq          BIGINT      NOT NULL AUTO_INCREMENT,
    id           CHAR(36)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    type         VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id     CHAR(36)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    item_id      BIGINT      NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    status       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    at           DATETIME(6) NOT NULL,
    published_at DATETIME(6) NULL,
    pub_seq      BIGINT      NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY order_events_id (id),
    UNIQUE KEY order_events_pub_seq (pub_seq),
    KEY order_events_order (order_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS order_events;
