package room_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// honestDraw is a draw of 10 tickets, 5 served, with the history a room
// writes: its line published, then revealed with N = 10.
func honestDraw(t *testing.T) (room.PublicDraw, room.Seed) {
	t.Helper()
	seed := room.NewSeed()
	pre := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	order, err := room.DrawOrder(seed, pre)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(pre))
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	return room.PublicDraw{ItemID: 3, Commitment: seed.Commitment(), Seed: seed.String(), PreQueue: pre, Served: order[:5], Line: 1,
		History: []room.DrawLine{{Line: 1, Commitment: seed.Commitment(), Lottery: true, PublishedAt: at,
			Seed: seed.String(), PreQueueSize: &n, RevealedAt: &at}}}, seed
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
		if o, _ := room.DrawOrder(swapped, d.PreQueue); o[0] == 7 {
			break // ticket 7 first: the friend's
		}
	}
	order, _ := room.DrawOrder(swapped, d.PreQueue)
	d.Commitment, d.Seed, d.Served = swapped.Commitment(), swapped.String(), order[:5]
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
	order, _ := room.DrawOrder(seed, d.PreQueue)
	d.Served = order[:5]
	n := int64(len(d.PreQueue))
	d.History[0].PreQueueSize = &n // even with a history that agrees
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
	d.PreQueue, d.Served = []int64{}, []int64{}
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
