-- +goose Up
-- Payments the provider reported (issue 35, docs/API.md "Payments from the
-- provider"): one row per verified webhook event that names a payment,
-- keyed by the provider's event id, so a redelivered event is found and
-- answered with the outcome it had the first time (paid, refund_due or
-- rejected). The row is written in the same transaction as the order's
-- change and its outbox event (paid, or refund_due), so the three exist
-- together or not at all. order_id is the event's metadata.order_id as
-- sent (it may name no order: then the outcome is rejected); reason says
-- why a payment was not taken as the order's.
CREATE TABLE IF NOT EXISTS payment_events (
    event_id    VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    type        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id    VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    amount      BIGINT       NOT NULL,
    currency    VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    outcome     VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reason      VARCHAR(255) NOT NULL DEFAULT '',
    received_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (event_id),
    KEY payment_events_order (order_id),
    KEY payment_events_outcome (outcome, received_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS payment_events;
