package room_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seckill/seckill/internal/room"
)

// kat is the known-answer seed: bytes 0x00..0x1f.
func katSeed() room.Seed {
	var s room.Seed
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

var katTickets = []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1000000007, 9007199254740993}

// TestDrawKnownAnswer: the expected order was computed outside Go, with
// Python's hmac and hashlib:
//
//	seed = bytes(range(32))
//	sorted(t, key=lambda x: hmac.new(seed, str(x).encode(), hashlib.sha256).digest())
//
// and the commitment with hashlib.sha256(seed).hexdigest().
func TestDrawKnownAnswer(t *testing.T) {
	t.Parallel()
	seed := katSeed()
	const wantCommitment = "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"
	if got := seed.Commitment(); got != wantCommitment {
		t.Errorf("Commitment = %s, want %s", got, wantCommitment)
	}
	want := []int64{8, 3, 11, 4, 7, 10, 9, 1, 2, 9007199254740993, 1000000007, 6, 12, 5}
	got, err := room.DrawOrder(seed, katTickets)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("DrawOrder = %v, want %v", got, want)
	}
	// The input order does not matter: the draw depends on the set only.
	rev := slices.Clone(katTickets)
	slices.Reverse(rev)
	if got2, _ := room.DrawOrder(seed, rev); !slices.Equal(got2, want) {
		t.Errorf("DrawOrder(reversed input) = %v, want %v", got2, want)
	}
	c := room.VerifyDraw(seed, wantCommitment, katTickets, want)
	if !c.OK() || c.Mismatch != -1 {
		t.Errorf("VerifyDraw(the right answer) = %+v, want OK", c)
	}
}

// TestDrawMatchesPrimitives recomputes a larger draw straight from
// crypto/hmac and crypto/sha256, step by step as docs/DESIGN.md states it.
func TestDrawMatchesPrimitives(t *testing.T) {
	t.Parallel()
	seed := room.NewSeed()
	tickets := make([]int64, 500)
	for i := range tickets {
		tickets[i] = int64(i + 1)
	}
	type kv struct {
		k []byte
		t int64
	}
	var kvs []kv
	for _, tk := range tickets {
		m := hmac.New(sha256.New, seed[:])
		fmt.Fprintf(m, "%d", tk)
		kvs = append(kvs, kv{m.Sum(nil), tk})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	got, err := room.DrawOrder(seed, tickets)
	if err != nil {
		t.Fatal(err)
	}
	for i := range kvs {
		if got[i] != kvs[i].t {
			t.Fatalf("position %d: DrawOrder %d, primitives %d", i, got[i], kvs[i].t)
		}
	}
	sum := sha256.Sum256(seed[:])
	if seed.Commitment() != hex.EncodeToString(sum[:]) {
		t.Errorf("Commitment is not the hex SHA-256 of the raw seed")
	}
	if slices.Equal(got, tickets) {
		t.Errorf("500 tickets drawn in join order: the draw does not shuffle")
	}
}

func TestVerifyDrawRefusals(t *testing.T) {
	t.Parallel()
	seed := katSeed()
	commit := seed.Commitment()
	order, _ := room.DrawOrder(seed, katTickets)

	other := seed
	other[0] ^= 1
	if c := room.VerifyDraw(other, commit, katTickets, order); c.CommitmentMatches || c.OrderMatches || c.OK() {
		t.Errorf("wrong seed: %+v, want neither commitment nor order to match", c)
	}
	if c := room.VerifyDraw(other, other.Commitment(), katTickets, order); !c.CommitmentMatches || c.OrderMatches {
		t.Errorf("another seed with its own commitment: %+v, want the order refused", c)
	}
	swapped := slices.Clone(order)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	if c := room.VerifyDraw(seed, commit, katTickets, swapped); c.OrderMatches || c.Mismatch != 3 {
		t.Errorf("reordered served list: %+v, want a mismatch at 3", c)
	}
	if c := room.VerifyDraw(seed, commit, katTickets, order[:5]); !c.OK() {
		t.Errorf("a served prefix (sold out early): %+v, want OK", c)
	}
	if c := room.VerifyDraw(seed, commit, katTickets, append(slices.Clone(order), 99)); c.OrderMatches || c.Mismatch != len(order) {
		t.Errorf("one served beyond the pre-queue: %+v, want a mismatch at %d", c, len(order))
	}
	if c := room.VerifyDraw(seed, commit, katTickets, order[1:]); c.OrderMatches || c.Mismatch != 0 {
		t.Errorf("the first drawn skipped: %+v, want a mismatch at 0", c)
	}
	if c := room.VerifyDraw(seed, "00"+commit[2:], katTickets, order); c.CommitmentMatches {
		t.Errorf("wrong commitment accepted")
	}
	if c := room.VerifyDraw(seed, commit, []int64{1, 2, 2}, nil); !errors.Is(c.Err, room.ErrDuplicateTicket) || c.OK() {
		t.Errorf("duplicate ticket: %+v, want ErrDuplicateTicket and not OK", c)
	}
}

func TestParseSeed(t *testing.T) {
	t.Parallel()
	s := room.NewSeed()
	got, err := room.ParseSeed(s.String())
	if err != nil || got != s {
		t.Fatalf("ParseSeed(String()) = %v, %v; want the seed back", got, err)
	}
	for _, bad := range []string{"", "00", s.String()[:62], s.String() + "00", "zz" + s.String()[2:]} {
		if _, err := room.ParseSeed(bad); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("ParseSeed(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if a, b := room.NewSeed(), room.NewSeed(); a == b {
		t.Error("two NewSeed calls gave the same seed")
	}
}
