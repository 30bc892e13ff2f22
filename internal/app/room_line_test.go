package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// roomLine is item id's current line, from its stored commitment: what a
// test signs into a pass it issues itself.
func roomLine(t testing.TB, db *gorm.DB, id int64) room.Line {
	t.Helper()
	var commitment string
	if err := db.Raw("SELECT commitment FROM item_rooms WHERE item_id = ?", id).Scan(&commitment).Error; err != nil {
		t.Fatal(err)
	}
	l, err := room.LineOf(commitment)
	if err != nil {
		t.Fatalf("item %d's stored commitment %q: %v", id, commitment, err)
	}
	return l
}

// Issue 21: the room turned off and on again starts a new line. A pass of
// the old line is refused at the instance that made the change (it names a
// ticket number that is another user's now), orders nothing and spends
// nothing; the new line's passes buy, and the old pass's holder buys after
// joining the new line.
func TestRoomOldLinePassRefusedAfterRestart(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	c := startRoomApp(t, b)
	db := b.DB(t)
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 300})
	oldLine := roomLine(t, db, id)
	ann := joinRoom(t, c, id, "ann")
	ann = awaitTicket(t, c, id, ann.Ticket, "admitted", 10*time.Second)
	if ann.Number != 1 || ann.Pass == "" {
		t.Fatalf("ann: ticket %d, pass %q; want 1 with a pass", ann.Number, ann.Pass)
	}
	if p, err := roomPassKey(t).Verify(ann.Pass, id, "ann", time.Now()); err != nil || p.Line != oldLine {
		t.Fatalf("ann's pass: line %v, err %v; want line %v", p.Line, err, oldLine)
	}
	path := fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id)
	if r := c.Must(t, "DELETE", path, nil, true, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete room: got %d %s", r.Status, r.Body)
	}
	if r := c.Must(t, "PUT", path, map[string]any{"admit_per_second": 100, "pass_ttl_seconds": 300}, true, nil); r.Status != http.StatusOK {
		t.Fatalf("set room again: got %d %s", r.Status, r.Body)
	}
	if roomLine(t, db, id) == oldLine {
		t.Fatalf("the room set up again kept line %v", oldLine)
	}
	ben := joinRoom(t, c, id, "ben")
	ben = awaitTicket(t, c, id, ben.Ticket, "admitted", 10*time.Second)
	if ben.Number != 1 || ben.Pass == "" {
		t.Fatalf("ben: ticket %d of the new line, pass %q; want 1 with a pass", ben.Number, ben.Pass)
	}

	// ann's old pass, with and without a key: refused, nothing changes.
	for _, key := range []string{"", "ann-old-key"} {
		wantError(t, "ann's order with her old line's pass", orderWithPass(t, c, id, "ann", ann.Pass, key), http.StatusForbidden, "pass_invalid")
	}
	if n := ordersOf(t, db, id, "ann"); n != 0 {
		t.Errorf("ann has %d orders after her old pass was refused, want 0", n)
	}
	if got := soldOf(t, db, id); got != 0 {
		t.Errorf("sold %d after the old pass was refused, want 0", got)
	}
	if got := ticketStatus(t, c, id, ben.Ticket); got.State != "admitted" || got.Pass != ben.Pass {
		t.Errorf("ben's ticket after ann's old pass: state %s, pass %q; want admitted with his pass", got.State, got.Pass)
	}

	if r := orderWithPass(t, c, id, "ben", ben.Pass, ""); r.Status != http.StatusCreated {
		t.Errorf("ben's order with his new line's pass: got %d %s, want 201", r.Status, r.Body)
	}
	// ann joins the new line and buys with its pass.
	ann2 := joinRoom(t, c, id, "ann")
	ann2 = awaitTicket(t, c, id, ann2.Ticket, "admitted", 10*time.Second)
	if ann2.Number != 2 || ann2.Pass == "" {
		t.Fatalf("ann in the new line: ticket %d, pass %q; want 2 with a pass", ann2.Number, ann2.Pass)
	}
	if r := orderWithPass(t, c, id, "ann", ann2.Pass, ""); r.Status != http.StatusCreated {
		t.Errorf("ann's order with her new line's pass: got %d %s, want 201", r.Status, r.Body)
	}
	if got := soldOf(t, db, id); got != 2 {
		t.Errorf("sold %d, want 2 (ben and ann, with the new line's passes)", got)
	}
}
