package app

import (
	"log/slog"
	"time"

	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/room"
)

// roomPoW is the proof-of-work of joining a waiting room
// (SECKILL_ROOM_POW_BITS, bits > 0): challenges signed with the rooms' key
// (under a domain of their own, so never mistaken for a pass), so every
// instance sharing the key accepts another's.
func roomPoW(key []byte, bits int, log *slog.Logger) (handler.PoWIssue, handler.PoWCheck, error) {
	k, err := room.NewPassKey(key)
	if err != nil {
		return nil, nil, err
	}
	log.Info("waiting rooms: joining needs a proof-of-work", "bits", bits)
	issue := func(itemID int64, user string) (string, int, time.Time, error) {
		c, expires, err := room.IssueChallenge(k, itemID, user, bits, time.Now())
		return c, bits, expires, err
	}
	check := func(itemID int64, user, challenge, nonce string) error {
		return room.VerifyPoW(k, challenge, nonce, itemID, user, bits, time.Now())
	}
	return issue, check, nil
}
