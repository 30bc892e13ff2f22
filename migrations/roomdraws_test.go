package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// Rooms that exist when 00013 runs get their current commitment as line 1
// of the draw's history: a room set up before the upgrade still has its
// commitment on record when it opens after it.
func TestRoomDrawsMigrationRecordsExistingRooms(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		db, d := openAt8(t, b)
		if err := migrations.UpTo(ctx, db, d, 12); err != nil {
			t.Fatal(err)
		}
		c := strings.Repeat("ab", 32)
		at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
		if _, err := db.ExecContext(ctx, `INSERT INTO item_rooms (item_id, admit_per_second, pass_ttl_seconds, lottery, paused, seed, commitment, created_at, updated_at)
			VALUES (41, 10, 60, TRUE, FALSE, ?, ?, ?, ?)`, strings.Repeat("0", 64), c, at, at); err != nil {
			t.Fatal(err)
		}
		if err := migrations.UpTo(ctx, db, d, 13); err != nil {
			t.Fatal(err)
		}
		var line int
		var got string
		var lottery bool
		var seed *string
		if err := db.QueryRowContext(ctx, "SELECT line, commitment, lottery, seed FROM room_draws WHERE item_id = 41").Scan(&line, &got, &lottery, &seed); err != nil {
			t.Fatal(err)
		}
		if line != 1 || got != c || !lottery || seed != nil {
			t.Errorf("room_draws row: line %d commitment %s lottery %v seed %v, want line 1, %s, true, not revealed", line, got, lottery, seed, c)
		}
	})
}
