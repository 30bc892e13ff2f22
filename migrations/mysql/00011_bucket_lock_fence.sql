-- +goose Up
-- lock_fence per bucket row: a lock item with buckets > 1 has a Redis lock
-- and a fence counter per bucket, and row b stores the highest fence that
-- wrote it (as items.lock_fence does for an item with one bucket). An order
-- of bucket b writes row b only with a fence no older than the row's.
ALTER TABLE item_stock ADD COLUMN lock_fence BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE item_stock DROP COLUMN lock_fence;
