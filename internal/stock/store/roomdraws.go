package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// The draw's evidence (migrations 00013_room_draws.sql): every commitment
// an item's waiting room ever published, with its line, and once the room
// opened its revealed seed and pre-queue size. Redis holds the live draw;
// these rows are what a Redis loss or a room turned off and on cannot
// replace, so the public draw document shows them beside Redis's.

// DrawLine is one published commitment of an item's room.
type DrawLine struct {
	ItemID      int64     `gorm:"column:item_id;primaryKey;autoIncrement:false"`
	Line        int       `gorm:"column:line;primaryKey;autoIncrement:false"`
	Commitment  string    `gorm:"column:commitment"`
	Lottery     bool      `gorm:"column:lottery"`
	PublishedAt time.Time `gorm:"column:published_at"`
	// Seed, PreQueue, Transcript and RevealedAt are nil until the line's
	// room opened (and this line was recorded there; Transcript since
	// migration 00016).
	Seed       *string    `gorm:"column:seed"`
	Transcript *string    `gorm:"column:transcript"`
	PreQueue   *int64     `gorm:"column:pre_queue"`
	RevealedAt *time.Time `gorm:"column:revealed_at"`
}

func (DrawLine) TableName() string { return "room_draws" }

// PublishDraw records commitment as item id's newest line, in tx: the
// transaction that stores it in item_rooms, holding the item's row lock
// (ChangeRoom, CreateItemWith), so two publishings of one item never pick
// the same line. A commitment already recorded is left as it is.
func PublishDraw(ctx context.Context, tx *gorm.DB, id int64, commitment string, lottery bool, at time.Time) error {
	var n int64
	if err := tx.WithContext(ctx).Model(&DrawLine{}).Where("item_id = ? AND commitment = ?", id, commitment).Count(&n).Error; err != nil {
		return dbError("read draw lines", err)
	}
	if n > 0 {
		return nil
	}
	var last struct{ Line int }
	if err := tx.WithContext(ctx).Model(&DrawLine{}).Select("COALESCE(MAX(line), 0) AS line").Where("item_id = ?", id).Scan(&last).Error; err != nil {
		return dbError("read draw lines", err)
	}
	l := DrawLine{ItemID: id, Line: last.Line + 1, Commitment: commitment, Lottery: lottery, PublishedAt: at.UTC()}
	if err := tx.WithContext(ctx).Create(&l).Error; err != nil {
		return dbError("publish draw line", err)
	}
	return nil
}

// RevealDraw records the opening of item id's line of commitment: its
// seed, the closed pre-queue's size and its transcript. Only the first record counts: a
// room opened again after Redis lost it (an empty pre-queue) does not
// overwrite the size of the real opening. It reports whether a row
// holds the reveal now (false: the commitment was never published).
func RevealDraw(ctx context.Context, db *gorm.DB, id int64, commitment, seed string, preQueue int64, transcript string, at time.Time) (bool, error) {
	if err := db.WithContext(ctx).Model(&DrawLine{}).
		Where("item_id = ? AND commitment = ? AND seed IS NULL", id, commitment).
		Updates(map[string]any{"seed": seed, "pre_queue": preQueue, "transcript": transcript, "revealed_at": at.UTC()}).Error; err != nil {
		return false, dbError("record the draw", err)
	}
	var n int64
	if err := db.WithContext(ctx).Model(&DrawLine{}).
		Where("item_id = ? AND commitment = ? AND seed IS NOT NULL", id, commitment).Count(&n).Error; err != nil {
		return false, dbError("read the draw", err)
	}
	return n > 0, nil
}

// DrawLines is every line item id published, oldest first.
func DrawLines(ctx context.Context, db *gorm.DB, id int64) ([]DrawLine, error) {
	var ls []DrawLine
	if err := db.WithContext(ctx).Where("item_id = ?", id).Order("line").Find(&ls).Error; err != nil {
		return nil, dbError("read draw lines", err)
	}
	return ls, nil
}
