-- +goose Up
-- Same as migrations/mysql/00016_room_draw_transcript.sql, in SQLite's dialect.
ALTER TABLE room_draws ADD COLUMN transcript TEXT NULL;

-- +goose Down
ALTER TABLE room_draws DROP COLUMN transcript;
