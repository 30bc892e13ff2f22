package handler

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// validatingRooms is a room that, like rooms.Service, refuses an invalid
// user id with room.ErrInvalid, so a route that passes one on shows it.
type validatingRooms struct{ joinCountingRooms }

func (r *validatingRooms) Join(ctx context.Context, v *stock.ItemView, user string) (*rooms.Ticket, error) {
	if !stock.ValidUserID(user) {
		return nil, fmt.Errorf("%w: user id %q", room.ErrInvalid, user)
	}
	return r.joinCountingRooms.Join(ctx, v, user)
}

// TestRoomTokenSubject (redteam #9): in JWT mode a token whose sub is not
// a valid user id is 400 invalid_request on join and challenge, as on the
// order path, never a 500; and room.ErrInvalid has its 400 in the table.
func TestRoomTokenSubject(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	key := room.GeneratePassKey()
	issue, check := powConfig(key)
	rs := &validatingRooms{joinCountingRooms{roomed: map[int64]bool{1: true}}}
	plain := newTestHandler(t, answeringShop(), Config{Rooms: rs, UserJWTSecret: secret})
	pow := newTestHandler(t, answeringShop(), Config{Rooms: rs, UserJWTSecret: secret, RoomPoW: check, RoomChallenge: issue})
	for _, sub := range []string{"alice bob", "alïce", strings.Repeat("x", stock.MaxUserIDLen+1), "tab\there"} {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		auth := map[string]string{"Authorization": "Bearer " + tok}
		if a := call(plain, "POST", "/api/v1/items/1/queue", "", auth); a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
			t.Errorf("join, sub %q: got %d %s, want 400 invalid_request", sub, a.status, a.body)
		}
		if a := call(pow, "GET", "/api/v1/items/1/queue/challenge", "", auth); a.status != http.StatusBadRequest || a.code() != CodeInvalidRequest {
			t.Errorf("challenge, sub %q: got %d %s, want 400 invalid_request", sub, a.status, a.body)
		}
	}
	if len(rs.joins) != 0 {
		t.Errorf("invalid subjects joined: %q", rs.joins)
	}
	if code := ErrorCode(fmt.Errorf("x: %w", room.ErrInvalid)); code != CodeInvalidRequest {
		t.Errorf("room.ErrInvalid is answered %q, want %q", code, CodeInvalidRequest)
	}
}
