-- +goose Up
-- Same version as migrations/mysql/00007_ascii_order_ids.sql, which stores
-- order ids as ASCII compared byte by byte. SQLite's TEXT already compares
-- with the BINARY collation; nothing to change, the file keeps both
-- dialects at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
