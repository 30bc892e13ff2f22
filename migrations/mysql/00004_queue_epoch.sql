-- +goose Up
-- queue_epoch fences lua-async writers: every queued order carries the
-- epoch of the gate that admitted it, and a batch commits only while the
-- item still has that epoch. Rebuilding a gate after Redis lost the queue
-- moves the epoch on, so a batch read from the lost queue can never be
-- written after the rebuild counted the units without it.
ALTER TABLE items ADD COLUMN queue_epoch BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE items DROP COLUMN queue_epoch;
