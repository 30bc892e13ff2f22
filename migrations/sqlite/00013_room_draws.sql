-- +goose Up
-- Same as migrations/mysql/00013_room_draws.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS room_draws (
    item_id      INTEGER NOT NULL,
    line         INTEGER NOT NULL,
    commitment   TEXT    NOT NULL,
    lottery      BOOLEAN NOT NULL,
    published_at DATETIME NOT NULL,
    seed         TEXT    NULL,
    pre_queue    INTEGER NULL,
    revealed_at  DATETIME NULL,
    PRIMARY KEY (item_id, line),
    UNIQUE (item_id, commitment)
);

INSERT OR IGNORE INTO room_draws (item_id, line, commitment, lottery, published_at)
SELECT item_id, 1, commitment, lottery, created_at FROM item_rooms;

-- +goose Down
DROP TABLE IF EXISTS room_draws;
