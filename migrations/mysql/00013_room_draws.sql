-- +goose Up
-- The evidence of every waiting room's draw (issue 33, docs/DESIGN.md
-- "Checking the draw"): one row per commitment an item ever published, its
-- line (1, 2, ... in publishing order: a room turned off and on, or whose
-- lottery changed, starts a new line), and once the room opened the
-- revealed seed and the closed pre-queue's size. A commitment's row is
-- written in the transaction that stores it in item_rooms; the reveal is
-- written once (a second opening, after Redis lost the room, does not
-- overwrite it). Rows are never deleted with the room: a Redis loss or a
-- room turned off and on cannot silently replace or empty the evidence.
CREATE TABLE IF NOT EXISTS room_draws (
    item_id      BIGINT   NOT NULL,
    line         INT      NOT NULL,
    commitment   CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lottery      BOOLEAN  NOT NULL,
    published_at DATETIME(6) NOT NULL,
    seed         CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    pre_queue    BIGINT   NULL,
    revealed_at  DATETIME(6) NULL,
    PRIMARY KEY (item_id, line),
    UNIQUE KEY room_draws_commitment (item_id, commitment)
) ENGINE=InnoDB;

-- The rooms that exist already: their current commitment is their first
-- recorded line (what they published before is not known).
INSERT IGNORE INTO room_draws (item_id, line, commitment, lottery, published_at)
SELECT item_id, 1, commitment, lottery, created_at FROM item_rooms;

-- +goose Down
DROP TABLE IF EXISTS room_draws;
