-- +goose Up
-- Same as migrations/mysql/00008_item_rooms.sql, in SQLite's dialect.
CREATE TABLE IF NOT EXISTS item_rooms (
    item_id          INTEGER NOT NULL PRIMARY KEY,
    admit_per_second INTEGER NOT NULL,
    pass_ttl_seconds INTEGER NOT NULL,
    lottery          BOOLEAN NOT NULL,
    paused           BOOLEAN NOT NULL DEFAULT 0,
    seed             TEXT    NOT NULL,
    commitment       TEXT    NOT NULL,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL
);

CREATE TABLE IF NOT EXISTS service_secrets (
    name       TEXT NOT NULL PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS service_secrets;
DROP TABLE IF EXISTS item_rooms;
