package room_test

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// honestDraw is a draw of 10 tickets, 5 served, with the history a room
// writes: its line published, then revealed with N = 10 and the
// transcript. Ticket n's string is "ticket n".
func honestDraw(t *testing.T) (room.PublicDraw, room.Seed) {
	t.Helper()
	seed := room.NewSeed()
	d := room.PublicDraw{ItemID: 3, Commitment: seed.Commitment(), Seed: seed.String(), PreQueue: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Line: 1}
	redraw(t, &d, seed, 5)
	n := int64(len(d.PreQueue))
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	d.History = []room.DrawLine{{Line: 1, Commitment: seed.Commitment(), Lottery: true, PublishedAt: at,
		Seed: seed.String(), PreQueueSize: &n, Transcript: d.Transcript, RevealedAt: &at}}
	return d, seed
}

// redraw sets d's leaves (ticket t's string "ticket t"), transcript and
// first served tickets from its pre-queue and seed, as an operator who
// rewrites a document consistently would.
func redraw(t *testing.T, d *room.PublicDraw, seed room.Seed, served int) {
	t.Helper()
	redrawWith(t, d, seed, "ticket %d", served)
}

func TestAuditHonest(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	a, err := d.Audit(seed.Commitment())
	if err != nil {
		t.Fatal(err)
	}
	if !a.OK() || !a.ObservedMatches || a.ObservedLine != 1 || !a.PreQueueWhole || !a.RecordedMatches {
		t.Errorf("Audit(honest) = %+v, want OK", a)
	}
}

// TestAuditSwappedSeed: the operator saw who queued, picked a seed that
// serves a friend first and published it with its own commitment. The
// document agrees with itself; the commitment the buyer saw before the
// opening does not.
func TestAuditSwappedSeed(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	observed := seed.Commitment()
	var swapped room.Seed
	for {
		swapped = room.NewSeed()
		tr, _ := room.ParseTranscript(d.Transcript)
		if o, _ := room.DrawOrder(swapped, tr, d.PreQueue); o[0] == 7 {
			break // ticket 7 first: the friend's
		}
	}
	d.Commitment, d.Seed = swapped.Commitment(), swapped.String()
	redraw(t, &d, swapped, 5)
	// An operator with the database rewrites the history too.
	d.History[0].Commitment, d.History[0].Seed = swapped.Commitment(), swapped.String()
	if c, err := d.Verify(); err != nil || !c.OK() {
		t.Fatalf("the swapped document is self-consistent: %+v %v", c, err)
	}
	a, err := d.Audit(observed)
	if err != nil {
		t.Fatal(err)
	}
	if a.OK() || a.ObservedMatches || a.ObservedLine != 0 {
		t.Errorf("Audit(swapped, observed C0) = %+v, want refused: not the observed commitment", a)
	}
}

func TestAuditMissingTicket(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	d.PreQueue = []int64{1, 2, 3, 5, 6, 7, 8, 9, 10} // ticket 4 left out
	redraw(t, &d, seed, 5)
	n := int64(len(d.PreQueue))
	d.History[0].PreQueueSize, d.History[0].Transcript = &n, d.Transcript // even with a history that agrees
	a, err := d.Audit(seed.Commitment())
	if err != nil {
		t.Fatal(err)
	}
	if a.OK() || a.PreQueueWhole || a.Missing != 4 {
		t.Errorf("Audit(ticket 4 missing) = %+v, want refused, missing 4", a)
	}
	if !a.DrawCheck.OK() {
		t.Errorf("the order itself matches: %+v", a.DrawCheck)
	}
}

// TestAuditEmptiedByLoss: Redis lost the room after the opening; the room
// set up again reads an empty pre-queue with the same seed, and the
// database recorded 10 tickets.
func TestAuditEmptiedByLoss(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	d.PreQueue = []int64{}
	redraw(t, &d, seed, 0)
	a, err := d.Audit(seed.Commitment())
	if err != nil {
		t.Fatal(err)
	}
	if a.OK() || a.RecordedMatches || a.Recorded == nil || *a.Recorded.PreQueueSize != 10 {
		t.Errorf("Audit(emptied) = %+v, want refused: 10 recorded, 0 listed", a)
	}
	if !a.PreQueueWhole || !a.DrawCheck.OK() {
		t.Errorf("an empty pre-queue is whole and its order trivially matches: %+v", a)
	}
}

func TestAuditNoRecord(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	d.History = nil // a document with no history proves no N
	a, err := d.Audit(seed.Commitment())
	if err != nil {
		t.Fatal(err)
	}
	if a.OK() || a.Recorded != nil {
		t.Errorf("Audit(no history) = %+v, want refused", a)
	}
	d, seed = honestDraw(t)
	d.History[0].Seed, d.History[0].PreQueueSize = "", nil // opening not recorded
	if a, _ := d.Audit(seed.Commitment()); a.OK() {
		t.Errorf("Audit(opening not recorded) = %+v, want refused", a)
	}
}

// TestAuditOldLine: the buyer's commitment is the item's line 1; the room
// was turned off and on and the document is line 2's.
func TestAuditOldLine(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	old := room.NewSeed()
	at := d.History[0].PublishedAt.Add(-time.Hour)
	d.History = append([]room.DrawLine{{Line: 1, Commitment: old.Commitment(), Lottery: true, PublishedAt: at}}, d.History...)
	d.History[1].Line, d.Line = 2, 2
	a, err := d.Audit(old.Commitment())
	if err != nil {
		t.Fatal(err)
	}
	if a.OK() || a.ObservedMatches || a.ObservedLine != 1 {
		t.Errorf("Audit(old line's commitment) = %+v, want refused, observed at line 1", a)
	}
	if a, _ := d.Audit(seed.Commitment()); !a.OK() {
		t.Errorf("Audit(current line's commitment) = %+v, want OK", a)
	}
}

func TestAuditInput(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	if _, err := d.Audit("abc"); err == nil {
		t.Error("Audit(not a commitment) succeeded")
	}
	up := []byte(seed.Commitment())
	for i, c := range up {
		if c >= 'a' && c <= 'f' {
			up[i] = c - 'a' + 'A'
		}
	}
	if a, err := d.Audit(" " + string(up) + "\n"); err != nil || !a.OK() {
		t.Errorf("Audit(upper case, spaces) = %+v %v, want OK", a, err)
	}
	d.Seed = ""
	if _, err := d.Audit(seed.Commitment()); err == nil {
		t.Error("Audit(seed not revealed) succeeded")
	}
}

// TestAuditTranscript: a document whose transcript is not its leaves', or
// that left a leaf out, or whose leaves are not the ones the database
// recorded at the opening, is refused; a buyer finds their own ticket's
// leaf at its number.
func TestAuditTranscript(t *testing.T) {
	t.Parallel()
	d, seed := honestDraw(t)
	if !d.HoldsTicket(4, "ticket 4") || d.HoldsTicket(4, "ticket 5") || d.HoldsTicket(11, "ticket 11") || d.HoldsTicket(0, "ticket 1") {
		t.Error("HoldsTicket: want ticket 4's string at 4 only")
	}

	// A wrong T: the served order drawn with a transcript the leaves do
	// not hash to (the operator ground T, or the seed with it).
	w, _ := honestDraw(t)
	wseed, _ := room.ParseSeed(w.Seed)
	var wrong room.Transcript
	wrong[5] = 9
	order, _ := room.DrawOrder(wseed, wrong, w.PreQueue)
	w.Transcript, w.Served, w.History[0].Transcript = wrong.String(), order[:5], wrong.String()
	if a, err := w.Audit(w.Commitment); err != nil || a.OK() || a.TranscriptMatches {
		t.Errorf("Audit(wrong transcript) = %+v %v, want refused", a, err)
	}

	// A leaf missing: 9 leaves for 10 tickets, T and the order made from
	// the 9.
	m := d
	m.Leaves = d.Leaves[:9]
	leaves := make([][32]byte, 9)
	for i := range leaves {
		leaves[i], _ = room.ParseTranscript(m.Leaves[i])
	}
	tr := room.TranscriptOf(leaves)
	order, _ = room.DrawOrder(seed, tr, m.PreQueue)
	m.Transcript, m.Served = tr.String(), order[:5]
	m.History = []room.DrawLine{d.History[0]}
	m.History[0].Transcript = m.Transcript
	if a, err := m.Audit(seed.Commitment()); err != nil || a.OK() || a.LeavesWhole {
		t.Errorf("Audit(a leaf missing) = %+v %v, want refused", a, err)
	}

	// Leaves replaced after the opening (sybils swapped in for real
	// tickets, the document redrawn): self-consistent, but the database
	// recorded another T.
	r := d
	r.Leaves = nil
	redrawWith(t, &r, seed, "sybil %d", 5)
	if c, err := r.Verify(); err != nil || !c.OK() {
		t.Fatalf("the rewritten document agrees with itself: %+v %v", c, err)
	}
	if a, _ := r.Audit(seed.Commitment()); a.OK() || a.RecordedMatches {
		t.Errorf("Audit(leaves rewritten after the recorded opening) = %+v, want refused", a)
	}

	// No transcript at all: not a draw this build can check.
	n := d
	n.Transcript = ""
	if _, err := n.Audit(seed.Commitment()); err == nil {
		t.Error("Audit(no transcript) succeeded")
	}
	n.Transcript, n.Leaves = d.Transcript, []string{"zz"}
	if _, err := n.Audit(seed.Commitment()); err == nil {
		t.Error("Audit(a leaf not hex) succeeded")
	}
}

// redrawWith is redraw with ticket strings of format.
func redrawWith(t *testing.T, d *room.PublicDraw, seed room.Seed, format string, served int) {
	t.Helper()
	leaves := make([][32]byte, len(d.PreQueue))
	d.Leaves = make([]string, len(d.PreQueue))
	for i, tk := range d.PreQueue {
		leaves[i] = room.TicketLeaf(fmt.Sprintf(format, tk))
		d.Leaves[i] = hex.EncodeToString(leaves[i][:])
	}
	tr := room.TranscriptOf(leaves)
	d.Transcript = tr.String()
	order, err := room.DrawOrder(seed, tr, d.PreQueue)
	if err != nil {
		t.Fatal(err)
	}
	d.Served = order[:min(served, len(order))]
}
