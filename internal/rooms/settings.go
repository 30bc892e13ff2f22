package rooms

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// Limits of a room's settings (docs/API.md, "Waiting room").
const (
	MinAdmitPerSecond     = 1
	MaxAdmitPerSecond     = 100_000
	MinPassTTLSeconds     = 5
	MaxPassTTLSeconds     = 3600
	DefaultPassTTLSeconds = 60
)

// Errors of the room service beside the stock ones (the handler maps them).
var (
	// ErrNoWaitingRoom: the item exists but has no waiting room.
	ErrNoWaitingRoom = errors.New("the item has no waiting room")
	// ErrRoomOpened: lottery cannot change once the sale opened or anyone
	// joined.
	ErrRoomOpened = errors.New("the waiting room has opened (or has tickets): lottery can no longer change")
	// ErrRoomFull: the room holds as many tickets as it may
	// (Config.MaxTickets); a user who holds one still gets it.
	ErrRoomFull = errors.New("the waiting room is full")
)

// Change is a request to set up or change an item's room. A nil field
// keeps the room's value (a new room: the default; AdmitPerSecond has none).
type Change struct {
	AdmitPerSecond *int
	PassTTLSeconds *int
	Lottery        *bool
	Paused         *bool
}

// Validate checks the values given; creating is true for a new room, which
// needs AdmitPerSecond.
func (c Change) Validate(creating bool) error {
	if creating && c.AdmitPerSecond == nil {
		return stock.Invalidf("waiting_room.admit_per_second is required")
	}
	if r := c.AdmitPerSecond; r != nil && (*r < MinAdmitPerSecond || *r > MaxAdmitPerSecond) {
		return stock.Invalidf("waiting_room.admit_per_second must be %d to %d", MinAdmitPerSecond, MaxAdmitPerSecond)
	}
	if t := c.PassTTLSeconds; t != nil && (*t < MinPassTTLSeconds || *t > MaxPassTTLSeconds) {
		return stock.Invalidf("waiting_room.pass_ttl_seconds must be %d to %d", MinPassTTLSeconds, MaxPassTTLSeconds)
	}
	return nil
}

// row is an item's room as stored (migrations 00008_item_rooms.sql).
type row struct {
	ItemID         int64  `gorm:"column:item_id;primaryKey;autoIncrement:false"`
	AdmitPerSecond int    `gorm:"column:admit_per_second"`
	PassTTLSeconds int    `gorm:"column:pass_ttl_seconds"`
	Lottery        bool   `gorm:"column:lottery"`
	Paused         bool   `gorm:"column:paused"`
	Seed           string `gorm:"column:seed"`
	Commitment     string `gorm:"column:commitment"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (row) TableName() string { return "item_rooms" }

func (r *row) passTTL() time.Duration { return time.Duration(r.PassTTLSeconds) * time.Second }

func (r *row) seed() (room.Seed, error) { return room.ParseSeed(r.Seed) }

// newSeed gives r a fresh seed and its commitment.
func (r *row) newSeed() {
	s := room.NewSeed()
	r.Seed, r.Commitment = s.String(), s.Commitment()
}

func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("rooms: %s: %w: %w", op, stock.ErrUnavailable, err)
}

// loadRows reads every room.
func loadRows(ctx context.Context, db *gorm.DB) ([]row, error) {
	var rows []row
	if err := db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, dbErr("load rooms", err)
	}
	return rows, nil
}

// loadRow reads one item's room; nil when it has none.
func loadRow(ctx context.Context, db *gorm.DB, itemID int64) (*row, error) {
	var r row
	err := db.WithContext(ctx).Where("item_id = ?", itemID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("load room", err)
	}
	return &r, nil
}

// roomKeySecret names the stored room key in service_secrets.
const roomKeySecret = "room_key"

// StoredKey is the room signing key kept in the database, made by the
// first instance that asks (INSERT, ignored when another instance's is
// already there, then read back): every instance on one database agrees.
func StoredKey(ctx context.Context, db *gorm.DB) ([]byte, error) {
	b := make([]byte, room.MinPassKeyLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	type secret struct {
		Name      string `gorm:"column:name;primaryKey"`
		Value     string `gorm:"column:value"`
		CreatedAt time.Time
	}
	tx := db.WithContext(ctx).Table("service_secrets")
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).
		Create(&secret{Name: roomKeySecret, Value: hex.EncodeToString(b), CreatedAt: time.Now().UTC()}).Error; err != nil {
		return nil, dbErr("store room key", err)
	}
	var s secret
	if err := db.WithContext(ctx).Table("service_secrets").Where("name = ?", roomKeySecret).Take(&s).Error; err != nil {
		return nil, dbErr("read room key", err)
	}
	key, err := hex.DecodeString(s.Value)
	if err != nil || len(key) < room.MinPassKeyLen {
		return nil, fmt.Errorf("rooms: the stored room key is not %d+ bytes of hex", room.MinPassKeyLen)
	}
	return key, nil
}
