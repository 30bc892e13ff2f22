package room

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// A pass is the proof that a user was admitted from an item's room. It is
// verified in the process, with no Redis call, so checking it on the order
// path costs one HMAC.
//
// Format (version 2), base64url without padding of:
//
//	0x02                      version
//	uvarint item id
//	uvarint ticket id
//	uvarint expiry            Unix seconds, rounded down; good while now < expiry
//	8 bytes line              the line the ticket is in (LineOf its commitment)
//	user id                   the rest of the payload, 1..64 bytes
//	32 bytes                  HMAC-SHA256(key, everything above)
//
// A pass of a typical user (a 10-byte id) is about 82 characters, 116 with
// a UUID. Version 1 (no line) is refused: its ticket number may be someone
// else's in a line started since.
const passVersion = 2

// MinPassKeyLen is the shortest key NewPassKey accepts, in bytes: HMAC-SHA256
// gains nothing from a longer key and loses strength with a shorter one.
const MinPassKeyLen = 32

const macLen = sha256.Size

// PassKey signs and verifies passes. Every instance of a sale must use the
// same key, or a pass issued by one is forged to another.
type PassKey struct {
	key       []byte
	generated bool
}

// NewPassKey uses key (at least MinPassKeyLen bytes), e.g. from configuration.
func NewPassKey(key []byte) (PassKey, error) {
	if len(key) < MinPassKeyLen {
		return PassKey{}, fmt.Errorf("%w: pass key is %d bytes, want at least %d", ErrInvalid, len(key), MinPassKeyLen)
	}
	return PassKey{key: append([]byte(nil), key...)}, nil
}

// ParsePassKey reads a key written as hex (tried first) or base64
// (standard or URL alphabet, padded or not), as configuration gives it.
func ParsePassKey(s string) (PassKey, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString,
		base64.RawURLEncoding.DecodeString,
		base64.URLEncoding.DecodeString,
		base64.RawStdEncoding.DecodeString,
		base64.StdEncoding.DecodeString,
	} {
		if b, err := dec(s); err == nil && len(b) >= MinPassKeyLen {
			return NewPassKey(b)
		}
	}
	return PassKey{}, fmt.Errorf("%w: pass key must be at least %d bytes written as hex or base64", ErrInvalid, MinPassKeyLen)
}

// GeneratePassKey makes a random key, for the embedded default. Such a key
// lives as long as the process: passes die with a restart and another
// instance cannot verify them, so the caller must say so (Generated is true).
func GeneratePassKey() PassKey {
	b := make([]byte, MinPassKeyLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return PassKey{key: b, generated: true}
}

// Generated reports whether the key was made by GeneratePassKey, not given.
func (k PassKey) Generated() bool { return k.generated }

// String never shows the key.
func (k PassKey) String() string {
	if k.generated {
		return "PassKey(generated)"
	}
	return "PassKey(configured)"
}

// Line names one line of a room: the first 8 bytes of its draw's
// commitment, which is new whenever the line starts over (the room turned
// off and on, or its lottery changed). A ticket number means something only
// in its line, so a pass carries it.
type Line [lineLen]byte

const lineLen = 8

// LineOf is the line of a room set up with commitment (64 lowercase hex
// digits, Seed.Commitment).
func LineOf(commitment string) (Line, error) {
	var l Line
	b, err := hex.DecodeString(commitment)
	if err != nil || len(b) != 32 || commitment != hex.EncodeToString(b) {
		return l, fmt.Errorf("%w: a commitment is 64 lowercase hex digits", ErrInvalid)
	}
	copy(l[:], b)
	return l, nil
}

// String is the line in hex.
func (l Line) String() string { return hex.EncodeToString(l[:]) }

// Pass is what a pass says.
type Pass struct {
	ItemID int64
	UserID string
	Ticket int64
	Expiry time.Time // the pass is good while now is before it (whole seconds)
	Line   Line      // the line Ticket is in
}

// Issue signs p. The expiry is rounded down to the second, so a pass never
// outlives the live entry the room keeps for it (to the millisecond).
func (k PassKey) Issue(p Pass) (string, error) {
	if len(k.key) == 0 {
		return "", fmt.Errorf("%w: zero PassKey", ErrInvalid)
	}
	if p.ItemID <= 0 || p.Ticket <= 0 || !stock.ValidUserID(p.UserID) {
		return "", fmt.Errorf("%w: pass needs a positive item and ticket and a valid user id", ErrInvalid)
	}
	exp := p.Expiry.Unix() // rounded down: a pass never outlives the room's record of it
	if exp <= 0 {
		return "", fmt.Errorf("%w: pass expiry %v before 1970", ErrInvalid, p.Expiry)
	}
	buf := make([]byte, 0, 1+3*binary.MaxVarintLen64+lineLen+len(p.UserID)+macLen)
	buf = append(buf, passVersion)
	buf = binary.AppendUvarint(buf, uint64(p.ItemID))
	buf = binary.AppendUvarint(buf, uint64(p.Ticket))
	buf = binary.AppendUvarint(buf, uint64(exp))
	buf = append(buf, p.Line[:]...)
	buf = append(buf, p.UserID...)
	buf = k.mac(buf, buf)
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

// mac appends HMAC-SHA256(key, payload) to dst.
func (k PassKey) mac(dst, payload []byte) []byte {
	h := hmac.New(sha256.New, k.key)
	h.Write(payload)
	return h.Sum(dst)
}

// VerifyIn is Verify of a pass for line too, the item's current line: a
// pass of another line (one the room has since started over from) is
// ErrPassWrongLine, checked last.
func (k PassKey) VerifyIn(token string, itemID int64, line Line, userID string, now time.Time) (Pass, error) {
	p, err := k.Verify(token, itemID, userID, now)
	if err == nil && p.Line != line {
		return p, ErrPassWrongLine
	}
	return p, err
}

// Verify checks that token is a pass signed by k for this item and user, and
// good at now, in any line (VerifyIn checks the line too). The signature is
// checked first, in constant time, so a forged pass learns nothing about
// its fields; then the item, the user, the expiry. The errors are
// ErrPassMissing, ErrPassForged, ErrPassWrongItem, ErrPassWrongUser and
// ErrPassExpired, all matching ErrPassRejected.
func (k PassKey) Verify(token string, itemID int64, userID string, now time.Time) (Pass, error) {
	if token == "" {
		return Pass{}, ErrPassMissing
	}
	if len(k.key) == 0 {
		return Pass{}, fmt.Errorf("%w: zero PassKey", ErrInvalid)
	}
	// The longest genuine pass: version, three varints, line, 64 bytes of user, MAC.
	if base64.RawURLEncoding.DecodedLen(len(token)) > 1+3*binary.MaxVarintLen64+lineLen+stock.MaxUserIDLen+macLen {
		return Pass{}, ErrPassForged
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 1+macLen {
		return Pass{}, ErrPassForged
	}
	payload, sig := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	var sum [macLen]byte
	if !hmac.Equal(k.mac(sum[:0], payload), sig) {
		return Pass{}, ErrPassForged
	}
	p, ok := decodePayload(payload)
	if !ok {
		// Signed by this key but not a pass this code writes: refuse it.
		return Pass{}, ErrPassForged
	}
	switch {
	case p.ItemID != itemID:
		return p, ErrPassWrongItem
	case p.UserID != userID:
		return p, ErrPassWrongUser
	case !now.Before(p.Expiry):
		return p, ErrPassExpired
	}
	return p, nil
}

func decodePayload(b []byte) (Pass, bool) {
	if len(b) == 0 || b[0] != passVersion {
		return Pass{}, false
	}
	b = b[1:]
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 || x == 0 || x > 1<<63-1 {
			return Pass{}, false
		}
		v[i], b = x, b[n:]
	}
	if len(b) < lineLen {
		return Pass{}, false
	}
	var line Line
	copy(line[:], b)
	user := string(b[lineLen:])
	if !stock.ValidUserID(user) {
		return Pass{}, false
	}
	return Pass{ItemID: int64(v[0]), Ticket: int64(v[1]), Expiry: time.Unix(int64(v[2]), 0), UserID: user, Line: line}, true
}
