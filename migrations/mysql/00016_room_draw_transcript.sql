-- +goose Up
-- The transcript of each opened line's closed pre-queue (docs/DESIGN.md
-- "Checking the draw"): the SHA-256 of its tickets' leaves, which the
-- draw order depends on. Written with the reveal, once; NULL for a line
-- not opened yet, or opened by a build before transcripts.
ALTER TABLE room_draws ADD COLUMN transcript CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL;

-- +goose Down
ALTER TABLE room_draws DROP COLUMN transcript;
