-- +goose Up
-- The waiting room of an item (issue 21, docs/DESIGN.md "Waiting room"):
-- its settings, the secret seed of its opening draw and the seed's public
-- commitment (SHA-256, lowercase hex), and whether admission is paused.
-- Redis holds only the line; whether an item has a room comes from here.
CREATE TABLE IF NOT EXISTS item_rooms (
    item_id          BIGINT   NOT NULL PRIMARY KEY,
    admit_per_second INT      NOT NULL,
    pass_ttl_seconds INT      NOT NULL,
    lottery          BOOLEAN  NOT NULL,
    paused           BOOLEAN  NOT NULL DEFAULT FALSE,
    seed             CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    commitment       CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at       DATETIME(6) NOT NULL,
    updated_at       DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- Secrets every instance must share, made once by the first instance that
-- needs one (INSERT IGNORE): the waiting room's signing key when
-- SECKILL_ROOM_KEY is not set.
CREATE TABLE IF NOT EXISTS service_secrets (
    name       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    value      VARCHAR(256) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS service_secrets;
DROP TABLE IF EXISTS item_rooms;
