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

// katLeaves are the known-answer leaves: the SHA-256 of "kat ticket N" for
// each of katTickets, in that order.
func katLeaves() [][32]byte {
	l := make([][32]byte, len(katTickets))
	for i, t := range katTickets {
		l[i] = room.TicketLeaf(fmt.Sprintf("kat ticket %d", t))
	}
	return l
}

// TestDrawKnownAnswer: the expected transcript and order were computed
// outside Go, with Python's hmac and hashlib:
//
//	seed = bytes(range(32))
//	leaves = [hashlib.sha256(b"kat ticket %d" % x).digest() for x in kat]
//	T = hashlib.sha256(b"".join(leaves)).digest()
//	sorted(kat, key=lambda x: hmac.new(seed, T + str(x).encode(), hashlib.sha256).digest())
//
// and the commitment with hashlib.sha256(seed).hexdigest().
func TestDrawKnownAnswer(t *testing.T) {
	t.Parallel()
	seed := katSeed()
	const wantCommitment = "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"
	if got := seed.Commitment(); got != wantCommitment {
		t.Errorf("Commitment = %s, want %s", got, wantCommitment)
	}
	tr := room.TranscriptOf(katLeaves())
	if got, want := tr.String(), "7bb1784bfd6fb75b13c4ef903dc17d82f6b03621660f88ff91db6cf9b8fea707"; got != want {
		t.Errorf("TranscriptOf = %s, want %s", got, want)
	}
	if got, want := room.TranscriptOf(nil).String(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("TranscriptOf(no leaves) = %s, want SHA-256 of nothing %s", got, want)
	}
	want := []int64{2, 1000000007, 1, 5, 3, 11, 7, 9, 12, 9007199254740993, 10, 8, 4, 6}
	got, err := room.DrawOrder(seed, tr, katTickets)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("DrawOrder = %v, want %v", got, want)
	}
	// The input order does not matter: the draw depends on the set only.
	rev := slices.Clone(katTickets)
	slices.Reverse(rev)
	if got2, _ := room.DrawOrder(seed, tr, rev); !slices.Equal(got2, want) {
		t.Errorf("DrawOrder(reversed input) = %v, want %v", got2, want)
	}
	c := room.VerifyDraw(seed, wantCommitment, tr, katLeaves(), katTickets, want)
	if !c.OK() || c.Mismatch != -1 {
		t.Errorf("VerifyDraw(the right answer) = %+v, want OK", c)
	}
}

// TestDrawMatchesPrimitives recomputes a larger draw straight from
// crypto/hmac and crypto/sha256, step by step as docs/API.md states it.
func TestDrawMatchesPrimitives(t *testing.T) {
	t.Parallel()
	seed := room.NewSeed()
	tickets := make([]int64, 500)
	all := sha256.New()
	for i := range tickets {
		tickets[i] = int64(i + 1)
		leaf := sha256.Sum256(fmt.Appendf(nil, "ticket string %d", i+1))
		all.Write(leaf[:])
	}
	tsum := all.Sum(nil)
	type kv struct {
		k []byte
		t int64
	}
	var kvs []kv
	for _, tk := range tickets {
		m := hmac.New(sha256.New, seed[:])
		m.Write(tsum)
		fmt.Fprintf(m, "%d", tk)
		kvs = append(kvs, kv{m.Sum(nil), tk})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	leaves := make([][32]byte, len(tickets))
	for i := range leaves {
		leaves[i] = room.TicketLeaf(fmt.Sprintf("ticket string %d", i+1))
	}
	tr := room.TranscriptOf(leaves)
	if !bytes.Equal(tr[:], tsum) {
		t.Fatalf("TranscriptOf %s, primitives %x", tr, tsum)
	}
	got, err := room.DrawOrder(seed, tr, tickets)
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

// TestDrawDependsOnEveryLeaf: changing any one pre-queue leaf (another
// ticket string at that number: another user, a sybil added in its place)
// changes the transcript and re-draws the whole order, so a seed known
// before the close does not tell which numbers win.
func TestDrawDependsOnEveryLeaf(t *testing.T) {
	t.Parallel()
	seed := katSeed()
	base := katLeaves()
	tr := room.TranscriptOf(base)
	order, _ := room.DrawOrder(seed, tr, katTickets)
	for i := range base {
		changed := slices.Clone(base)
		changed[i][31] ^= 1
		tr2 := room.TranscriptOf(changed)
		if tr2 == tr {
			t.Fatalf("leaf %d changed, transcript did not", i)
		}
		o2, _ := room.DrawOrder(seed, tr2, katTickets)
		if slices.Equal(o2, order) {
			t.Errorf("leaf %d changed, the order stayed %v", i, order)
		}
		if c := room.VerifyDraw(seed, seed.Commitment(), tr, changed, katTickets, order); c.TranscriptMatches || c.OK() {
			t.Errorf("leaf %d changed under the published transcript: %+v, want refused", i, c)
		}
	}
	// Swapping two leaves (the same tickets, other numbers) changes it too.
	sw := slices.Clone(base)
	sw[0], sw[1] = sw[1], sw[0]
	if room.TranscriptOf(sw) == tr {
		t.Error("two leaves swapped, transcript unchanged: the leaves' order is not bound")
	}
	// One ticket more (a join just before the close) re-draws everything
	// for the tickets already there.
	more := append(slices.Clone(base), room.TicketLeaf("late joiner"))
	o3, _ := room.DrawOrder(seed, room.TranscriptOf(more), append(slices.Clone(katTickets), 13))
	o3 = slices.DeleteFunc(o3, func(t int64) bool { return t == 13 })
	if slices.Equal(o3, order) {
		t.Errorf("one more ticket left the others' relative order %v as it was", order)
	}
}

func TestVerifyDrawRefusals(t *testing.T) {
	t.Parallel()
	seed := katSeed()
	commit := seed.Commitment()
	leaves := katLeaves()
	tr := room.TranscriptOf(leaves)
	order, _ := room.DrawOrder(seed, tr, katTickets)

	other := seed
	other[0] ^= 1
	if c := room.VerifyDraw(other, commit, tr, leaves, katTickets, order); c.CommitmentMatches || c.OrderMatches || c.OK() {
		t.Errorf("wrong seed: %+v, want neither commitment nor order to match", c)
	}
	if c := room.VerifyDraw(other, other.Commitment(), tr, leaves, katTickets, order); !c.CommitmentMatches || c.OrderMatches {
		t.Errorf("another seed with its own commitment: %+v, want the order refused", c)
	}
	swapped := slices.Clone(order)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	if c := room.VerifyDraw(seed, commit, tr, leaves, katTickets, swapped); c.OrderMatches || c.Mismatch != 3 {
		t.Errorf("reordered served list: %+v, want a mismatch at 3", c)
	}
	if c := room.VerifyDraw(seed, commit, tr, leaves, katTickets, order[:5]); !c.OK() {
		t.Errorf("a served prefix (sold out early): %+v, want OK", c)
	}
	if c := room.VerifyDraw(seed, commit, tr, leaves, katTickets, append(slices.Clone(order), 99)); c.OrderMatches || c.Mismatch != len(order) {
		t.Errorf("one served beyond the pre-queue: %+v, want a mismatch at %d", c, len(order))
	}
	if c := room.VerifyDraw(seed, commit, tr, leaves, katTickets, order[1:]); c.OrderMatches || c.Mismatch != 0 {
		t.Errorf("the first drawn skipped: %+v, want a mismatch at 0", c)
	}
	if c := room.VerifyDraw(seed, "00"+commit[2:], tr, leaves, katTickets, order); c.CommitmentMatches {
		t.Errorf("wrong commitment accepted")
	}
	if c := room.VerifyDraw(seed, commit, tr, leaves[:3], []int64{1, 2, 2}, nil); !errors.Is(c.Err, room.ErrDuplicateTicket) || c.OK() {
		t.Errorf("duplicate ticket: %+v, want ErrDuplicateTicket and not OK", c)
	}
	// A wrong transcript: the order the operator served is drawn with it,
	// but the leaves do not hash to it.
	var wrong room.Transcript
	wrong[0] = 1
	worder, _ := room.DrawOrder(seed, wrong, katTickets)
	if c := room.VerifyDraw(seed, commit, wrong, leaves, katTickets, worder); c.TranscriptMatches || c.OK() {
		t.Errorf("a transcript the leaves do not hash to: %+v, want refused", c)
	}
	// A leaf left out: fewer leaves than tickets.
	short := leaves[:len(leaves)-1]
	str := room.TranscriptOf(short)
	sorder, _ := room.DrawOrder(seed, str, katTickets)
	if c := room.VerifyDraw(seed, commit, str, short, katTickets, sorder); c.LeavesWhole || c.OK() {
		t.Errorf("a leaf missing: %+v, want refused", c)
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
