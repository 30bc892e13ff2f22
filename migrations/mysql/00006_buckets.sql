-- +goose Up
-- buckets splits a lua item's stock over that many Redis gate keys, each
-- in its own hash slot, so one hot item spreads over a cluster's masters
-- (docs/DESIGN.md, "Buckets"). 1 is the single gate every item had before.
ALTER TABLE items ADD COLUMN buckets INT NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE items DROP COLUMN buckets;
