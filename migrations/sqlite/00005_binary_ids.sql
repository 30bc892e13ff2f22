-- +goose Up
-- Same version as migrations/mysql/00005_binary_ids.sql, which makes user
-- ids and Idempotency-Keys byte-exact. SQLite already is: its TEXT columns
-- compare with the BINARY collation unless declared otherwise, and none of
-- orders.user_id, orders.idempotency_key, order_failures.user_id or
-- order_failures.idempotency_key is (TestIDColumnsCompareBytes checks it).
-- Nothing to change; the file keeps both dialects at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
