-- +goose Up
-- The queue epoch of each bucket row (docs/DESIGN.md, "Buckets for
-- lua-async"): a lua-async batch of bucket b commits only while row b has
-- the epoch its entries carry, so a batch read from a bucket stream Redis
-- lost is refused, and the other buckets' batches are not.
ALTER TABLE item_stock ADD COLUMN queue_epoch BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE item_stock DROP COLUMN queue_epoch;
