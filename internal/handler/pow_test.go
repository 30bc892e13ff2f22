package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// joinCountingRooms has a room on the items in roomed and counts joins.
type joinCountingRooms struct {
	answeringRooms
	roomed map[int64]bool
	joins  []string
}

func (r *joinCountingRooms) Roomed(id int64) bool { return r.roomed[id] }
func (r *joinCountingRooms) Join(ctx context.Context, v *stock.ItemView, user string) (*rooms.Ticket, error) {
	r.joins = append(r.joins, user)
	return r.answeringRooms.Join(ctx, v, user)
}

const powTestBits = 8

// powConfig is the proof-of-work as the app wires it, with key.
func powConfig(key room.PassKey) (PoWIssue, PoWCheck) {
	issue := func(itemID int64, user string) (string, int, time.Time, error) {
		c, exp, err := room.IssueChallenge(key, itemID, user, powTestBits, time.Now())
		return c, powTestBits, exp, err
	}
	check := func(itemID int64, user, challenge, nonce string) error {
		return room.VerifyPoW(key, challenge, nonce, itemID, user, powTestBits, time.Now())
	}
	return issue, check
}

// TestQueueChallenge: the challenge route answers a challenge bound to the
// user (the token's in JWT mode) and item, that the join's check accepts
// once solved; it answers 404 when proof-of-work is off, and the room
// routes' errors otherwise.
func TestQueueChallenge(t *testing.T) {
	t.Parallel()
	key := room.GeneratePassKey()
	issue, check := powConfig(key)
	shop := answeringShop()
	shop.itemView = func(_ context.Context, id int64) (*stock.ItemView, error) {
		if id > 2 {
			return nil, stock.ErrNotFound
		}
		return &stock.ItemView{ID: id, Name: "widget", Remaining: 8}, nil
	}
	rs := &joinCountingRooms{roomed: map[int64]bool{1: true}} // item 2 has no room
	h := newTestHandler(t, shop, Config{Rooms: rs, RoomPoW: check, RoomChallenge: issue})

	before := time.Now()
	a := call(h, "GET", "/api/v1/items/1/queue/challenge?user_id=alice", "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("challenge: got %d %s, want 200", a.status, a.body)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", cc)
	}
	var got challengeJSON
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Bits != powTestBits || got.Challenge == "" {
		t.Errorf("challenge: got %s, want a challenge of %d bits", a.body, powTestBits)
	}
	exp, err := time.Parse(time.RFC3339, got.ExpiresAt)
	if err != nil || !strings.HasSuffix(got.ExpiresAt, "Z") || len(got.ExpiresAt) != len("2006-01-02T15:04:05.000Z") {
		t.Errorf("expires_at %q: want RFC 3339 in UTC with milliseconds (%v)", got.ExpiresAt, err)
	}
	if exp.Before(before.Add(room.ChallengeTTL).Truncate(time.Millisecond)) || exp.After(time.Now().Add(room.ChallengeTTL)) {
		t.Errorf("expires_at %v: want %v after the request", exp, room.ChallengeTTL)
	}
	nonce := room.SolvePoW(got.Challenge, got.Bits)
	if err := check(1, "alice", got.Challenge, nonce); err != nil {
		t.Errorf("the issued challenge, solved, is refused: %v", err)
	}
	if err := check(1, "bob", got.Challenge, nonce); err == nil {
		t.Error("alice's challenge accepted for bob")
	}

	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"no user", "/api/v1/items/1/queue/challenge", 400, CodeInvalidRequest},
		{"bad user", "/api/v1/items/1/queue/challenge?user_id=al%20ice", 400, CodeInvalidRequest},
		{"bad item", "/api/v1/items/x/queue/challenge?user_id=alice", 400, CodeInvalidRequest},
		{"no room", "/api/v1/items/2/queue/challenge?user_id=alice", 409, CodeNoWaitingRoom},
		{"no item", "/api/v1/items/3/queue/challenge?user_id=alice", 404, CodeNotFound},
	} {
		if a := call(h, "GET", tc.path, "", nil); a.status != tc.status || a.code() != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
	}

	off := newTestHandler(t, answeringShop(), Config{Rooms: rs})
	if a := call(off, "GET", "/api/v1/items/1/queue/challenge?user_id=alice", "", nil); a.status != 404 || a.code() != CodeNotFound ||
		!strings.Contains(string(a.body), "proof-of-work is off") {
		t.Errorf("proof-of-work off: got %d %s, want 404 saying it is off", a.status, a.body)
	}

	// JWT mode: the token's user, whatever the query says.
	secret := []byte(strings.Repeat("s", 32))
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	jh := newTestHandler(t, answeringShop(), Config{Rooms: rs, RoomPoW: check, RoomChallenge: issue, UserJWTSecret: secret})
	if a := call(jh, "GET", "/api/v1/items/1/queue/challenge?user_id=mallory", "", nil); a.status != 401 {
		t.Errorf("JWT mode without a token: got %d %s, want 401", a.status, a.body)
	}
	a = call(jh, "GET", "/api/v1/items/1/queue/challenge?user_id=mallory", "", map[string]string{"Authorization": "Bearer " + tok})
	if a.status != 200 {
		t.Fatalf("JWT mode: got %d %s, want 200", a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	nonce = room.SolvePoW(got.Challenge, got.Bits)
	if err := check(1, "carol", got.Challenge, nonce); err != nil {
		t.Errorf("JWT mode: the challenge is not carol's: %v", err)
	}
	if len(rs.joins) != 0 {
		t.Errorf("challenges joined %v", rs.joins)
	}
}

// TestJoinNeedsProofOfWork: with proof-of-work on, a join without one is
// 403 pow_required, with a bad one 403 pow_invalid, and neither reaches the
// room; a solved challenge joins. Off, a join needs none.
func TestJoinNeedsProofOfWork(t *testing.T) {
	t.Parallel()
	key := room.GeneratePassKey()
	issue, check := powConfig(key)
	rs := &joinCountingRooms{roomed: map[int64]bool{1: true}}
	h := newTestHandler(t, answeringShop(), Config{Rooms: rs, RoomPoW: check, RoomChallenge: issue})

	now := time.Now()
	mk := func(item int64, user string, at time.Time) string {
		c, _, err := room.IssueChallenge(key, item, user, powTestBits, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	good := mk(1, "alice", now)
	noWork := "0"
	for n := 0; room.PoWZeroBits(good, noWork) >= powTestBits; n++ {
		noWork = strconv.Itoa(n + 1)
	}
	expired := mk(1, "alice", now.Add(-2*room.ChallengeTTL))
	bobs := mk(1, "bob", now)
	otherItem := mk(2, "alice", now)
	forged, _, _ := room.IssueChallenge(room.GeneratePassKey(), 1, "alice", powTestBits, now)
	pow := func(c, nonce string) string {
		b, _ := json.Marshal(map[string]any{"user_id": "alice", "pow": map[string]string{"challenge": c, "nonce": nonce}})
		return string(b)
	}
	for _, tc := range []struct{ name, body, code string }{
		{"no pow", `{"user_id":"alice"}`, CodePoWRequired},
		{"null pow", `{"user_id":"alice","pow":null}`, CodePoWRequired},
		{"empty pow", `{"user_id":"alice","pow":{}}`, CodePoWInvalid},
		{"no work", pow(good, noWork), CodePoWInvalid},
		{"not decimal", pow(good, "0x1"), CodePoWInvalid},
		{"expired", pow(expired, room.SolvePoW(expired, powTestBits)), CodePoWInvalid},
		{"bob's challenge", pow(bobs, room.SolvePoW(bobs, powTestBits)), CodePoWInvalid},
		{"another item's", pow(otherItem, room.SolvePoW(otherItem, powTestBits)), CodePoWInvalid},
		{"another key's", pow(forged, room.SolvePoW(forged, powTestBits)), CodePoWInvalid},
	} {
		a := call(h, "POST", "/api/v1/items/1/queue", tc.body, nil)
		if a.status != http.StatusForbidden || a.code() != tc.code {
			t.Errorf("%s: got %d %s, want 403 %s", tc.name, a.status, a.body, tc.code)
		}
	}
	if len(rs.joins) != 0 {
		t.Fatalf("refused proofs joined: %v", rs.joins)
	}
	a := call(h, "POST", "/api/v1/items/1/queue", pow(good, room.SolvePoW(good, powTestBits)), nil)
	if a.status != http.StatusOK || fmt.Sprint(rs.joins) != "[alice]" {
		t.Errorf("solved: got %d %s, joins %v; want 200 and alice joined", a.status, a.body, rs.joins)
	}

	// A sale that is over says so without a puzzle.
	over := answeringShop()
	over.itemView = func(context.Context, int64) (*stock.ItemView, error) {
		return &stock.ItemView{ID: 1, Name: "widget", Remaining: 0}, nil
	}
	oh := newTestHandler(t, over, Config{Rooms: rs, RoomPoW: check, RoomChallenge: issue})
	if a := call(oh, "POST", "/api/v1/items/1/queue", `{"user_id":"carl"}`, nil); a.status != http.StatusConflict || a.code() != CodeSoldOut {
		t.Errorf("sold out, no proof: got %d %s, want 409 sold_out", a.status, a.body)
	}

	off := newTestHandler(t, answeringShop(), Config{Rooms: rs})
	if a := call(off, "POST", "/api/v1/items/1/queue", `{"user_id":"bob"}`, nil); a.status != http.StatusOK {
		t.Errorf("proof-of-work off: got %d %s, want 200", a.status, a.body)
	}
}
