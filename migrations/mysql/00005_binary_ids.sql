-- +goose Up
-- User ids and Idempotency-Keys are byte-exact and case-sensitive, as Redis
-- compares them: "alice" and "ALICE" are two users. The columns were
-- VARCHAR in the table's default collation, utf8mb4_general_ci, so the
-- unique keys took "ALICE" for "alice" and the database disagreed with the
-- gate. VARBINARY compares bytes on MySQL and MariaDB alike and, unlike the
-- *_bin collations (PAD SPACE), never ignores trailing spaces. Both values
-- are ASCII (validated), so a byte is a character and the lengths hold.
-- Rows written before are unique under the case-insensitive keys, so they
-- are unique under the byte-exact ones too. The ALTER copies the tables:
-- run it outside a sale.
ALTER TABLE orders
    MODIFY user_id         VARBINARY(64)  NOT NULL,
    MODIFY idempotency_key VARBINARY(128) NULL;
ALTER TABLE order_failures
    MODIFY user_id         VARBINARY(64)  NOT NULL,
    MODIFY idempotency_key VARBINARY(128) NULL;

-- +goose Down
-- Fails with a duplicate-key error when two users differ only in case.
ALTER TABLE order_failures
    MODIFY user_id         VARCHAR(64)  NOT NULL,
    MODIFY idempotency_key VARCHAR(128) NULL;
ALTER TABLE orders
    MODIFY user_id         VARCHAR(64)  NOT NULL,
    MODIFY idempotency_key VARCHAR(128) NULL;
