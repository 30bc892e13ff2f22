package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Proof-of-work on joining a room (optional, off by default): before it
// joins, a client asks for a challenge, a string the server signs, bound to
// the item and the user and good for ChallengeTTL; it then finds a nonce, a
// decimal string, such that
//
//	SHA-256(challenge + ":" + nonce)
//
// starts with at least bits zero bits (about 2^bits hashes on average), and
// joins with both. The server keeps nothing: VerifyPoW checks the signature,
// the binding, the expiry and the work, one HMAC and one SHA-256.
//
// Replay: nothing records a challenge as spent, so a solved challenge can be
// sent again, by the same user, for the same item, until it expires. That
// buys nothing: a join is one place per user, and joining again answers the
// same ticket. Another user, another item or a later minute needs new work.
// What proof-of-work costs a bot is one solution per identity per minute;
// it is a brake on creating many identities (in the body's user_id mode,
// where identities are free), not a limit on requests (the per-address rate
// limit is that).
//
// Challenge format (version 1), base64url without padding of:
//
//	0x01                      version
//	uvarint item id
//	uvarint expiry            Unix milliseconds; good while now < expiry
//	1 byte                    bits the challenge was issued for
//	user id                   the rest of the payload, 1..64 bytes
//	32 bytes                  HMAC-SHA256(key, powDomain + everything above)
//
// The MAC covers a domain prefix that is not part of the challenge, so a
// challenge is never a valid pass (or anything else the key signs), nor
// the other way round. The alphabet has no ':', so challenge + ":" + nonce
// splits one way only.
const powVersion = 1

// powDomain separates the challenges' MACs from the passes' under one key.
const powDomain = "seckill room pow challenge\x00"

// ChallengeTTL is how long a challenge is good for.
const ChallengeTTL = 60 * time.Second

// MaxPoWBits is the most leading zero bits a challenge may ask for (2^32
// hashes is hours of a browser's time: far beyond any sane setting).
const MaxPoWBits = 32

// MaxNonceLen is the longest nonce accepted, in decimal digits (any uint64
// fits in 20).
const MaxNonceLen = 20

// maxChallengeLen is the longest genuine challenge, in characters.
var maxChallengeLen = base64.RawURLEncoding.EncodedLen(1 + 2*binary.MaxVarintLen64 + 1 + stock.MaxUserIDLen + macLen)

// Proof-of-work errors. Every refusal of a given proof matches ErrPoWInvalid;
// a handler answers 403 pow_required or pow_invalid, and may count the
// reasons.
var (
	// ErrPoWRequired: no challenge was given (proof-of-work is on).
	ErrPoWRequired = errors.New("room: proof-of-work required")

	// ErrPoWInvalid is the parent of every reason a proof is refused.
	ErrPoWInvalid = errors.New("room: proof-of-work invalid")

	// ErrPoWForged: the challenge does not decode, or its signature does
	// not match under the key (tampered, or signed by another key).
	ErrPoWForged = fmt.Errorf("%w: challenge forged or malformed", ErrPoWInvalid)

	// ErrPoWExpired: a good challenge, past its expiry.
	ErrPoWExpired = fmt.Errorf("%w: challenge expired", ErrPoWInvalid)

	// ErrPoWWrongItem: a good challenge issued for another item.
	ErrPoWWrongItem = fmt.Errorf("%w: challenge issued for another item", ErrPoWInvalid)

	// ErrPoWWrongUser: a good challenge issued to another user.
	ErrPoWWrongUser = fmt.Errorf("%w: challenge issued to another user", ErrPoWInvalid)

	// ErrPoWBadNonce: the nonce is not 1 to MaxNonceLen decimal digits.
	ErrPoWBadNonce = fmt.Errorf("%w: nonce must be 1 to %d decimal digits", ErrPoWInvalid, MaxNonceLen)

	// ErrPoWTooEasy: the challenge was issued for fewer bits than are now
	// required (the setting was raised since), or the hash has fewer
	// leading zero bits than required: the work was not done.
	ErrPoWTooEasy = fmt.Errorf("%w: not enough work", ErrPoWInvalid)
)

// IssueChallenge signs a challenge for userID to join itemID's room with
// bits (1..MaxPoWBits) of work, good from now for ChallengeTTL; expires is
// when it stops being good. It keeps nothing.
func IssueChallenge(key PassKey, itemID int64, userID string, bits int, now time.Time) (challenge string, expires time.Time, err error) {
	if len(key.key) == 0 {
		return "", time.Time{}, fmt.Errorf("%w: zero PassKey", ErrInvalid)
	}
	if itemID <= 0 || !stock.ValidUserID(userID) {
		return "", time.Time{}, fmt.Errorf("%w: challenge needs a positive item and a valid user id", ErrInvalid)
	}
	if bits < 1 || bits > MaxPoWBits {
		return "", time.Time{}, fmt.Errorf("%w: proof-of-work bits %d, want 1 to %d", ErrInvalid, bits, MaxPoWBits)
	}
	expires = now.Add(ChallengeTTL).Truncate(time.Millisecond)
	exp := expires.UnixMilli()
	if exp <= 0 {
		return "", time.Time{}, fmt.Errorf("%w: challenge expiry %v before 1970", ErrInvalid, expires)
	}
	buf := make([]byte, 0, 1+2*binary.MaxVarintLen64+1+len(userID)+macLen)
	buf = append(buf, powVersion)
	buf = binary.AppendUvarint(buf, uint64(itemID))
	buf = binary.AppendUvarint(buf, uint64(exp))
	buf = append(buf, byte(bits))
	buf = append(buf, userID...)
	buf = key.powMAC(buf, buf)
	return base64.RawURLEncoding.EncodeToString(buf), time.UnixMilli(exp), nil
}

// powMAC appends HMAC-SHA256(key, powDomain + payload) to dst.
func (k PassKey) powMAC(dst, payload []byte) []byte {
	h := hmac.New(sha256.New, k.key)
	h.Write([]byte(powDomain))
	h.Write(payload)
	return h.Sum(dst)
}

// VerifyPoW checks that nonce solves challenge, a challenge signed by key
// for userID to join itemID, good at now, with at least bits (1..MaxPoWBits,
// the setting now) leading zero bits. No challenge is ErrPoWRequired; every
// other refusal matches ErrPoWInvalid (ErrPoWForged, ErrPoWExpired,
// ErrPoWWrongItem, ErrPoWWrongUser, ErrPoWBadNonce, ErrPoWTooEasy). The
// signature is checked first, in constant time, so a forged challenge
// learns nothing of its fields. It costs one HMAC and one SHA-256.
func VerifyPoW(key PassKey, challenge, nonce string, itemID int64, userID string, bits int, now time.Time) error {
	if len(key.key) == 0 {
		return fmt.Errorf("%w: zero PassKey", ErrInvalid)
	}
	if bits < 1 || bits > MaxPoWBits {
		return fmt.Errorf("%w: proof-of-work bits %d, want 1 to %d", ErrInvalid, bits, MaxPoWBits)
	}
	if challenge == "" {
		return ErrPoWRequired
	}
	if !decimal(nonce) {
		return ErrPoWBadNonce
	}
	if len(challenge) > maxChallengeLen {
		return ErrPoWForged
	}
	var raw [1 + 2*binary.MaxVarintLen64 + 1 + stock.MaxUserIDLen + macLen]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], []byte(challenge))
	if err != nil || n < 1+macLen {
		return ErrPoWForged
	}
	payload, sig := raw[:n-macLen], raw[n-macLen:n]
	var sum [macLen]byte
	if !hmac.Equal(key.powMAC(sum[:0], payload), sig) {
		return ErrPoWForged
	}
	c, ok := decodeChallenge(payload)
	if !ok {
		return ErrPoWForged // signed by this key, but not a challenge this code writes
	}
	switch {
	case c.itemID != itemID:
		return ErrPoWWrongItem
	case c.userID != userID:
		return ErrPoWWrongUser
	case !now.Before(c.expiry):
		return ErrPoWExpired
	case c.bits < bits:
		return ErrPoWTooEasy
	}
	if PoWZeroBits(challenge, nonce) < bits {
		return ErrPoWTooEasy
	}
	return nil
}

// PoWZeroBits is the number of leading zero bits (at most 32) of
// SHA-256(challenge + ":" + nonce): the work a nonce shows. Clients (the
// load harness, tests) solve with it; VerifyPoW checks with it.
func PoWZeroBits(challenge, nonce string) int {
	var buf [256]byte // no allocation for a genuine challenge and nonce
	b := append(buf[:0], challenge...)
	b = append(b, ':')
	b = append(b, nonce...)
	sum := sha256.Sum256(b)
	return bits.LeadingZeros32(binary.BigEndian.Uint32(sum[:4]))
}

// SolvePoW is a client's side: the first nonce, counting from 0, that
// solves challenge with bits of work, as the page's solver (pow.js) finds
// it. It takes about 2^bits hashes (16 bits: a few milliseconds here); the
// load harness and the tests solve with it.
func SolvePoW(challenge string, bits int) string {
	for n := uint64(0); ; n++ {
		if nonce := strconv.FormatUint(n, 10); PoWZeroBits(challenge, nonce) >= bits {
			return nonce
		}
	}
}

// decimal says whether s is 1 to MaxNonceLen ASCII digits.
func decimal(s string) bool {
	if len(s) == 0 || len(s) > MaxNonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

type challengeFields struct {
	itemID int64
	userID string
	expiry time.Time
	bits   int
}

func decodeChallenge(b []byte) (challengeFields, bool) {
	if len(b) == 0 || b[0] != powVersion {
		return challengeFields{}, false
	}
	b = b[1:]
	var v [2]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 || x == 0 || x > 1<<63-1 {
			return challengeFields{}, false
		}
		v[i], b = x, b[n:]
	}
	if len(b) < 1 || b[0] < 1 || b[0] > MaxPoWBits {
		return challengeFields{}, false
	}
	bits, user := int(b[0]), string(b[1:])
	if !stock.ValidUserID(user) {
		return challengeFields{}, false
	}
	return challengeFields{itemID: int64(v[0]), userID: user, expiry: time.UnixMilli(int64(v[1])), bits: bits}, true
}
