package rooms

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// The bound on a room's tickets: min(MaxTickets, max(1000, 50 × units
// left)); past it a new user's join is ErrRoomFull and a holder's answers
// their ticket.
func TestJoinRefusedPastTheRoomsBound(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	s, err := New(ctx, db, b.Universal(t), noShop{}, nil, Config{Key: make([]byte, 32), KeyPrefix: b.KeyPrefix,
		Tick: 10 * time.Millisecond, Reload: time.Hour, MaxTickets: 5})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Close)
	id := storeRoom(t, db)
	s.Learn(ctx, id)
	opens := time.Now().UTC().Add(time.Hour)
	v := &stock.ItemView{ID: id, Remaining: 10, StartsAt: &opens}
	var first *Ticket
	for i := range 7 {
		tk, err := s.Join(ctx, v, fmt.Sprintf("u%d", i))
		switch {
		case i < 5 && err != nil:
			t.Fatalf("join %d under the bound: %v", i, err)
		case i == 0:
			first = tk
		case i >= 5 && !errors.Is(err, ErrRoomFull):
			t.Errorf("join %d past the bound of 5: %v %+v, want ErrRoomFull", i, err, tk)
		}
	}
	again, err := s.Join(ctx, v, "u0")
	if err != nil || again.Number != first.Number {
		t.Errorf("holder joining again past the bound: %v %+v, want ticket %d", err, again, first.Number)
	}

	for _, tc := range []struct{ max, remaining, want int64 }{
		{DefaultMaxTickets, 1, MinRoomTickets},
		{DefaultMaxTickets, 10_000, 500_000},
		{DefaultMaxTickets, 1 << 60, DefaultMaxTickets},
		{5, 10, 5},
		{-1, 10, 0},
	} {
		s := &Service{cfg: Config{MaxTickets: tc.max}}
		if got := s.maxTickets(&stock.ItemView{Remaining: tc.remaining}); got != tc.want {
			t.Errorf("bound with MaxTickets %d and %d left: got %d, want %d", tc.max, tc.remaining, got, tc.want)
		}
	}
}
