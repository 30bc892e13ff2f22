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
	"time"
)

// The opening draw orders the pre-queue (every ticket taken before the room
// opened) at random, in a way anyone can check afterwards:
//
//  1. At set-up the room draws a secret 32-byte seed and publishes its
//     commitment, the lowercase hex SHA-256 of the seed's 32 raw bytes.
//  2. At the opening the pre-queue closes (tickets 1..N). Each ticket's
//     leaf is the SHA-256 of its ticket string, the exact ASCII string the
//     buyer got from the join (TicketLeaf); the transcript T is the SHA-256
//     of the N leaves' raw 32 bytes concatenated in ticket order (T of an
//     empty pre-queue is SHA-256 of nothing). The room publishes the
//     leaves (hex, in ticket order) and T, and reveals the seed (the room
//     refuses a seed that does not hash to the commitment).
//  3. Each pre-queue ticket t gets the key HMAC-SHA256(seed, T || decimal(t)):
//     the HMAC key is the seed's 32 raw bytes, the message T's 32 raw
//     bytes followed by the ticket id in ASCII decimal without sign or
//     leading zeros ("17"). Tickets are served in ascending order of their
//     keys, compared as unsigned big-endian byte strings. Ticket ids are
//     unique, so two keys are equal only if HMAC-SHA256 collides: there
//     are no ties to break.
//
// The operator cannot pick the seed after seeing who queued, provided the
// draw is checked against the commitment the buyer saw before the opening
// (Audit; a document is always consistent with a commitment published in
// it), and buyers cannot predict it (it is secret until the opening). A
// seed leaked before the opening no longer tells which numbers win: the
// order depends on T, which nobody knows before the pre-queue closes (every
// ticket string carries a MAC under the service's secret key, so not even
// the set of users fixes it), and any join, up to the last, changes the
// whole order. What it cannot rule out is an operator holding both the
// seed and the ticket key who adds (or leaves out) tickets of its own just
// before the close until the order suits it: each try is a full re-draw,
// and every ticket it added is a leaf of the published pre-queue
// (docs/DESIGN.md, "Checking the draw").
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

// TicketLeaf is a pre-queue ticket's leaf in the transcript: the SHA-256
// of its ticket string.
func TicketLeaf(ticket string) [sha256.Size]byte { return sha256.Sum256([]byte(ticket)) }

// Transcript is the digest of a closed pre-queue: the SHA-256 of its
// tickets' leaves in ticket order.
type Transcript [sha256.Size]byte

// TranscriptOf is the transcript of leaves (the leaf of ticket i+1 at i).
func TranscriptOf(leaves [][sha256.Size]byte) Transcript {
	h := sha256.New()
	for i := range leaves {
		h.Write(leaves[i][:])
	}
	var t Transcript
	h.Sum(t[:0])
	return t
}

// ParseTranscript reads a transcript (or a leaf) written as 64 hex digits.
func ParseTranscript(s string) (Transcript, error) {
	var t Transcript
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(t) {
		return t, fmt.Errorf("%w: a transcript or leaf is %d hex digits", ErrInvalid, 2*len(t))
	}
	copy(t[:], b)
	return t, nil
}

// String is the transcript in lowercase hex, as published.
func (t Transcript) String() string { return hex.EncodeToString(t[:]) }

// DrawOrder is the order in which the pre-queue's tickets are served: the
// tickets sorted by HMAC-SHA256(seed, transcript || decimal ticket id). It
// returns ErrDuplicateTicket if a ticket appears twice.
func DrawOrder(seed Seed, transcript Transcript, preQueue []int64) ([]int64, error) {
	type keyed struct {
		key    [sha256.Size]byte
		ticket int64
	}
	ks := make([]keyed, len(preQueue))
	mac := hmac.New(sha256.New, seed[:])
	var msg [sha256.Size + 20]byte
	copy(msg[:], transcript[:])
	for i, t := range preQueue {
		mac.Reset()
		mac.Write(strconv.AppendInt(msg[:sha256.Size], t, 10))
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
	// LeavesWhole: there is one leaf per pre-queue ticket.
	LeavesWhole bool
	// TranscriptMatches: the leaves hash to the published transcript.
	// Computed is the transcript recomputed from the leaves.
	TranscriptMatches bool
	Computed          Transcript
	// OrderMatches: the served tickets are the drawn order's first
	// len(served) tickets, in that order. A sale that sold out before the
	// pre-queue was through serves a prefix only.
	OrderMatches bool
	// Mismatch is the index of the first served ticket that differs from
	// the drawn order (len(drawn order) if more were served than drawn),
	// -1 when the order matches.
	Mismatch int
	// Drawn is the order recomputed from the seed, the leaves' transcript
	// and the pre-queue; nil if the pre-queue holds a duplicate.
	Drawn []int64
	// Err is ErrDuplicateTicket when the pre-queue is not a set, else nil.
	Err error
}

// OK reports whether the commitment, the transcript and the order match.
func (c DrawCheck) OK() bool {
	return c.CommitmentMatches && c.LeavesWhole && c.TranscriptMatches && c.OrderMatches
}

// VerifyDraw says whether seed matches commitment, whether leaves (one per
// pre-queue ticket, in ticket order) hash to the published transcript, and
// whether served (the pre-queue tickets in the order they were admitted)
// is the order the draw gives for preQueue, seed and the leaves'
// transcript. It needs nothing but the public data.
func VerifyDraw(seed Seed, commitment string, transcript Transcript, leaves [][sha256.Size]byte, preQueue, served []int64) DrawCheck {
	c := DrawCheck{Mismatch: -1}
	want := seed.Commitment()
	c.CommitmentMatches = strings.EqualFold(want, commitment)
	c.LeavesWhole = len(leaves) == len(preQueue)
	c.Computed = TranscriptOf(leaves)
	c.TranscriptMatches = hmac.Equal(c.Computed[:], transcript[:])
	c.Drawn, c.Err = DrawOrder(seed, c.Computed, preQueue)
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
	// Transcript and Leaves are published with the seed: the leaf of
	// each pre-queue ticket (TicketLeaf of its ticket string, hex, ticket
	// 1 first) and their transcript (TranscriptOf).
	Transcript string   `json:"transcript,omitempty"`
	Leaves     []string `json:"leaves,omitempty"`
	// Served is the pre-queue's tickets in the order they were admitted so far.
	Served []int64 `json:"served"`
	// Line is the current line's number in History (0: the document has
	// no history).
	Line int `json:"line,omitempty"`
	// History is every commitment the item ever published, oldest first,
	// as the database recorded it (not Redis: a lost room or a room turned
	// off and on cannot replace or empty it).
	History []DrawLine `json:"history,omitempty"`
}

// DrawLine is one commitment an item published: a line of its room.
type DrawLine struct {
	Line        int       `json:"line"`
	Commitment  string    `json:"commitment"`
	Lottery     bool      `json:"lottery"`
	PublishedAt time.Time `json:"published_at"`
	// Seed, PreQueueSize, Transcript and RevealedAt are recorded when the
	// line's room opened: the revealed seed, how many tickets the closed
	// pre-queue held (tickets 1..PreQueueSize) and their transcript.
	Seed         string     `json:"seed,omitempty"`
	Transcript   string     `json:"transcript,omitempty"`
	PreQueueSize *int64     `json:"pre_queue_size,omitempty"`
	RevealedAt   *time.Time `json:"revealed_at,omitempty"`
}

// Verify checks d: the seed must be revealed and well-formed, then it is
// VerifyDraw. It checks d against itself only: Audit checks it against a
// commitment observed before the opening.
func (d PublicDraw) Verify() (DrawCheck, error) {
	if d.Seed == "" {
		return DrawCheck{}, fmt.Errorf("%w: the seed is not revealed yet (the room has not opened)", ErrInvalid)
	}
	seed, err := ParseSeed(d.Seed)
	if err != nil {
		return DrawCheck{}, err
	}
	if d.Transcript == "" {
		return DrawCheck{}, fmt.Errorf("%w: the document publishes no transcript (a room opened by a build before transcripts, or not a draw document)", ErrInvalid)
	}
	transcript, err := ParseTranscript(d.Transcript)
	if err != nil {
		return DrawCheck{}, err
	}
	leaves := make([][sha256.Size]byte, len(d.Leaves))
	for i, l := range d.Leaves {
		v, err := ParseTranscript(l)
		if err != nil {
			return DrawCheck{}, fmt.Errorf("%w: leaf %d is not 64 hex digits", ErrInvalid, i+1)
		}
		leaves[i] = v
	}
	return VerifyDraw(seed, d.Commitment, transcript, leaves, d.PreQueue, d.Served), nil
}

// HoldsTicket reports whether the document's leaf of ticket number is the
// leaf of ticket, the buyer's own ticket string: their ticket is in the
// transcript, at its number.
func (d PublicDraw) HoldsTicket(number int64, ticket string) bool {
	if number < 1 || number > int64(len(d.Leaves)) {
		return false
	}
	leaf := TicketLeaf(ticket)
	return strings.EqualFold(d.Leaves[number-1], hex.EncodeToString(leaf[:]))
}

// Audit is the check of a draw document against a commitment the buyer
// observed independently of it (printed on their ticket, or saved from the
// item view before the opening). A document is self-consistent whatever
// seed the operator picked after seeing the queue, as long as it publishes
// that seed's commitment with it: only the observed one tells.
type Audit struct {
	DrawCheck
	// Observed is the commitment checked against; ObservedMatches: it is
	// the document's. ObservedLine is the history's line holding it (0:
	// none: the item never published it).
	Observed        string
	ObservedMatches bool
	ObservedLine    int
	// PreQueueWhole: the pre-queue is exactly tickets 1..N (the room
	// numbers its tickets from 1 and draws every one taken before the
	// opening). Missing is the smallest ticket of 1..N it lacks.
	PreQueueWhole bool
	Missing       int64
	// Recorded is the history's line of the document's commitment, nil if
	// there is none. RecordedMatches: it records the opening, with the
	// document's seed, transcript and N, the document's pre-queue size (a
	// room whose draw Redis lost reads an empty pre-queue: the database
	// remembers N and T).
	Recorded        *DrawLine
	RecordedMatches bool
}

// OK reports whether every check passed.
func (a Audit) OK() bool {
	return a.DrawCheck.OK() && a.ObservedMatches && a.PreQueueWhole && a.RecordedMatches
}

// Audit checks d against observed, a commitment (64 hex digits) the buyer
// saw before the opening: Verify, then that d's commitment is observed,
// that its pre-queue is tickets 1..N, and that its history recorded the
// opening with the same seed, transcript and N.
func (d PublicDraw) Audit(observed string) (Audit, error) {
	observed = strings.ToLower(strings.TrimSpace(observed))
	if _, err := LineOf(observed); err != nil {
		return Audit{}, fmt.Errorf("%w: the observed commitment is 64 hex digits", ErrInvalid)
	}
	c, err := d.Verify()
	if err != nil {
		return Audit{}, err
	}
	a := Audit{DrawCheck: c, Observed: observed, ObservedMatches: strings.EqualFold(d.Commitment, observed)}
	for i := range d.History {
		l := &d.History[i]
		if strings.EqualFold(l.Commitment, observed) {
			a.ObservedLine = l.Line
		}
		if strings.EqualFold(l.Commitment, d.Commitment) {
			a.Recorded = l
		}
	}
	a.Missing = firstMissing(d.PreQueue)
	a.PreQueueWhole = a.Missing == 0
	if r := a.Recorded; r != nil && r.PreQueueSize != nil {
		a.RecordedMatches = strings.EqualFold(r.Seed, d.Seed) && *r.PreQueueSize == int64(len(d.PreQueue)) &&
			r.Transcript != "" && strings.EqualFold(r.Transcript, d.Transcript)
	}
	return a, nil
}

// firstMissing is the smallest ticket of 1..len(pre) that pre lacks, 0
// when pre is exactly 1..len(pre).
func firstMissing(pre []int64) int64 {
	n := int64(len(pre))
	seen := make([]bool, n+1)
	for _, t := range pre {
		if t >= 1 && t <= n {
			seen[t] = true
		}
	}
	for t := int64(1); t <= n; t++ {
		if !seen[t] {
			return t
		}
	}
	return 0
}
