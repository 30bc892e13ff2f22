package app

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
)

// parseRoomKey reads SECKILL_ROOM_KEY: hex first, then base64 (either
// alphabet, padded or not), at least room.MinPassKeyLen bytes.
func parseRoomKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){hex.DecodeString, base64.RawURLEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawStdEncoding.DecodeString, base64.StdEncoding.DecodeString} {
		if b, err := dec(s); err == nil && len(b) >= room.MinPassKeyLen {
			return b, nil
		}
	}
	return nil, fmt.Errorf("want at least %d bytes written as hex or base64", room.MinPassKeyLen)
}

func parsePassFactor(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0.1 || f > 100 {
		return 0, errors.New("want a number from 0.1 to 100")
	}
	return f, nil
}

// roomKey is SECKILL_ROOM_KEY, or the key kept in the database (made by
// the first instance that needed it): instances sharing a database agree.
func roomKey(ctx context.Context, cfg Config, db *gorm.DB, log *slog.Logger) ([]byte, error) {
	if cfg.RoomKey != "" {
		return parseRoomKey(cfg.RoomKey)
	}
	key, err := rooms.StoredKey(ctx, db)
	if err != nil {
		return nil, err
	}
	log.Info("waiting rooms: SECKILL_ROOM_KEY is not set; passes are signed with a key generated once and kept in the database (service_secrets), shared by every instance on it")
	return key, nil
}
