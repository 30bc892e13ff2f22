package outbox

import (
	"testing"

	"github.com/seckill/seckill/internal/stock/store"
)

// distinctRuns keeps the events in order and never puts two events of one
// order in one run, so a batch publisher's failure cannot let an order's
// later event be stored before its earlier one.
func TestDistinctRunsKeepOrdersApart(t *testing.T) {
	ev := func(id, order string) store.Event { return store.Event{ID: id, OrderID: order} }
	evs := []store.Event{ev("1", "a"), ev("2", "b"), ev("3", "a"), ev("4", "c"), ev("5", "b"), ev("6", "d")}
	runs := distinctRuns(evs)
	var got [][]string
	for _, r := range runs {
		var ids []string
		seen := map[string]bool{}
		for _, e := range r {
			if seen[e.OrderID] {
				t.Errorf("run %v has order %s twice", r, e.OrderID)
			}
			seen[e.OrderID] = true
			ids = append(ids, e.ID)
		}
		got = append(got, ids)
	}
	want := [][]string{{"1", "2"}, {"3", "4", "5", "6"}}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("runs %v, want %v", got, want)
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("runs %v, want %v", got, want)
			}
		}
	}
	if runs := distinctRuns(nil); len(runs) != 0 {
		t.Errorf("no events: %d runs, want 0", len(runs))
	}
}
