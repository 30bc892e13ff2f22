package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
)

func TestDrawLines(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		db := b.DB(t)
		at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		c1, c2 := strings.Repeat("a", 64), strings.Repeat("b", 64)
		publish := func(item int64, c string) {
			t.Helper()
			if err := db.Transaction(func(tx *gorm.DB) error { return PublishDraw(ctx, tx, item, c, true, at) }); err != nil {
				t.Fatalf("publish %s: %v", c[:4], err)
			}
		}
		publish(7, c1)
		publish(7, c1) // the same commitment again: no new line
		publish(8, c2) // another item's lines are its own
		publish(7, c2)

		ok, err := RevealDraw(ctx, db, 7, c1, strings.Repeat("1", 64), 12, strings.Repeat("7", 64), at.Add(time.Hour))
		if err != nil || !ok {
			t.Fatalf("reveal: %v %v", ok, err)
		}
		// A second opening (Redis lost the room: an empty pre-queue) does
		// not overwrite the first.
		ok, err = RevealDraw(ctx, db, 7, c1, strings.Repeat("1", 64), 0, strings.Repeat("e", 64), at.Add(2*time.Hour))
		if err != nil || !ok {
			t.Fatalf("reveal again: %v %v", ok, err)
		}
		if ok, err := RevealDraw(ctx, db, 7, strings.Repeat("c", 64), strings.Repeat("1", 64), 3, strings.Repeat("7", 64), at); err != nil || ok {
			t.Fatalf("reveal of a commitment never published: %v %v, want false", ok, err)
		}

		ls, err := DrawLines(ctx, db, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 2 {
			t.Fatalf("%d lines, want 2: %+v", len(ls), ls)
		}
		if ls[0].Line != 1 || ls[0].Commitment != c1 || ls[1].Line != 2 || ls[1].Commitment != c2 {
			t.Errorf("lines %+v, want c1 at line 1, c2 at line 2", ls)
		}
		if ls[0].Seed == nil || *ls[0].Seed != strings.Repeat("1", 64) || ls[0].PreQueue == nil || *ls[0].PreQueue != 12 ||
			ls[0].Transcript == nil || *ls[0].Transcript != strings.Repeat("7", 64) ||
			ls[0].RevealedAt == nil || !ls[0].RevealedAt.Equal(at.Add(time.Hour)) {
			t.Errorf("line 1's reveal: %+v, want seed 11..., pre-queue 12, transcript 77... at %v", ls[0], at.Add(time.Hour))
		}
		if ls[1].Seed != nil || ls[1].PreQueue != nil || ls[1].Transcript != nil || ls[1].RevealedAt != nil {
			t.Errorf("line 2 is not revealed: %+v", ls[1])
		}
		if !ls[1].PublishedAt.Equal(at) {
			t.Errorf("line 2 published at %v, want %v", ls[1].PublishedAt, at)
		}
		other, err := DrawLines(ctx, db, 8)
		if err != nil || len(other) != 1 || other[0].Line != 1 {
			t.Errorf("item 8's lines %+v %v, want one, line 1", other, err)
		}
	})
}
