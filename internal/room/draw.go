package room

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The opening draw orders the pre-queue (every ticket taken before the room
// opened) at random, in a way anyone can check afterwards:
//
//  1. At set-up the room draws a secret 32-byte seed and publishes its
//     commitment, the lowercase hex SHA-256 of the seed's 32 raw bytes.
//  2. At the opening the seed is revealed (the room refuses a seed that
//     does not hash to the commitment).
//  3. Each pre-queue ticket t gets the key HMAC-SHA256(seed, decimal(t)):
//     the HMAC key is the seed's 32 raw bytes, the message the ticket id
//     in ASCII decimal without sign or leading zeros ("17"). Tickets are
//     served in ascending order of their keys, compared as unsigned
//     big-endian byte strings. Ticket ids are unique, so two keys are equal
//     only if HMAC-SHA256 collides: there are no ties to break.
//
// The operator cannot pick the seed after seeing who queued (it is
// committed before), and buyers cannot predict it (it is secret until the
// opening). What the commitment cannot rule out is an operator who leaks
// the seed to friends before the opening: they could compute which ticket
// numbers draw well and join at the matching moment.

// SeedLen is the length of a draw seed in bytes.
const SeedLen = 32

// Seed is the secret of a room's opening draw.
type Seed [SeedLen]byte

// NewSeed draws a random seed.
func NewSeed() Seed {
	var s Seed
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go 1.24+)
	return s
}

// ParseSeed reads a seed written as 64 hex digits.
func ParseSeed(s string) (Seed, error) {
	var seed Seed
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != SeedLen {
		return seed, fmt.Errorf("%w: a seed is %d hex digits", ErrInvalid, 2*SeedLen)
	}
	copy(seed[:], b)
	return seed, nil
}

// String is the seed in lowercase hex: the form that is revealed.
func (s Seed) String() string { return hex.EncodeToString(s[:]) }

// Commitment is the lowercase hex SHA-256 of the seed's raw bytes.
func (s Seed) Commitment() string {
	sum := sha256.Sum256(s[:])
	return hex.EncodeToString(sum[:])
}

// DrawOrder is the order in which the pre-queue's tickets are served: the
// tickets sorted by HMAC-SHA256(seed, decimal ticket id). It returns
// ErrDuplicateTicket if a ticket appears twice.
func DrawOrder(seed Seed, preQueue []int64) ([]int64, error) {
	type keyed struct {
		key    [sha256.Size]byte
		ticket int64
	}
	ks := make([]keyed, len(preQueue))
	mac := hmac.New(sha256.New, seed[:])
	var num [20]byte
	for i, t := range preQueue {
		mac.Reset()
		mac.Write(strconv.AppendInt(num[:0], t, 10))
		mac.Sum(ks[i].key[:0])
		ks[i].ticket = t
	}
	slices.SortFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key[:], b.key[:]) })
	order := make([]int64, len(ks))
	for i, k := range ks {
		if i > 0 && k.ticket == ks[i-1].ticket {
			return nil, fmt.Errorf("%w: %d", ErrDuplicateTicket, k.ticket)
		}
		order[i] = k.ticket
	}
	return order, nil
}

// DrawCheck is VerifyDraw's verdict.
type DrawCheck struct {
	// CommitmentMatches: the seed hashes to the published commitment.
	CommitmentMatches bool
	// OrderMatches: the served tickets are the drawn order's first
	// len(served) tickets, in that order. A sale that sold out before the
	// pre-queue was through serves a prefix only.
	OrderMatches bool
	// Mismatch is the index of the first served ticket that differs from
	// the drawn order (len(drawn order) if more were served than drawn),
	// -1 when the order matches.
	Mismatch int
	// Drawn is the order recomputed from the seed and the pre-queue; nil if
	// the pre-queue holds a duplicate.
	Drawn []int64
	// Err is ErrDuplicateTicket when the pre-queue is not a set, else nil.
	Err error
}

// OK reports whether both the commitment and the order match.
func (c DrawCheck) OK() bool { return c.CommitmentMatches && c.OrderMatches }

// VerifyDraw says whether seed matches commitment and whether served (the
// pre-queue tickets in the order they were admitted) is the order the draw
// gives for preQueue. It needs nothing but the public data.
func VerifyDraw(seed Seed, commitment string, preQueue, served []int64) DrawCheck {
	c := DrawCheck{Mismatch: -1}
	want := seed.Commitment()
	c.CommitmentMatches = strings.EqualFold(want, commitment)
	c.Drawn, c.Err = DrawOrder(seed, preQueue)
	if c.Err != nil {
		c.Mismatch = 0
		return c
	}
	for i, t := range served {
		if i >= len(c.Drawn) || c.Drawn[i] != t {
			c.Mismatch = i
			return c
		}
	}
	c.OrderMatches = true
	return c
}

// PublicDraw is what a room publishes about its opening draw, the input of
// VerifyDraw (and of the seckill-draw command) as JSON.
type PublicDraw struct {
	ItemID     int64  `json:"item_id"`
	Commitment string `json:"commitment"`
	// Seed is empty until the room opens.
	Seed string `json:"seed,omitempty"`
	// PreQueue is every ticket taken before the opening.
	PreQueue []int64 `json:"pre_queue"`
	// Served is the pre-queue's tickets in the order they were admitted so far.
	Served []int64 `json:"served"`
}

// Verify checks d: the seed must be revealed and well-formed, then it is
// VerifyDraw.
func (d PublicDraw) Verify() (DrawCheck, error) {
	if d.Seed == "" {
		return DrawCheck{}, fmt.Errorf("%w: the seed is not revealed yet (the room has not opened)", ErrInvalid)
	}
	seed, err := ParseSeed(d.Seed)
	if err != nil {
		return DrawCheck{}, err
	}
	return VerifyDraw(seed, d.Commitment, d.PreQueue, d.Served), nil
}
