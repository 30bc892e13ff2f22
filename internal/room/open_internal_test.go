package room

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// TestOpenFinishesAfterACrash: an instance that closed the pre-queue and
// died before the draw was written leaves a room that admits nobody, where
// joins queue after the pre-queue, and that the next Open, from another
// instance, finishes with the same draw.
func TestOpenFinishesAfterACrash(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		now := time.Unix(1_900_000_000, 0)
		dead, err := New(b.Universal(t), 7, &Options{KeyPrefix: b.KeyPrefix})
		if err != nil {
			t.Fatal(err)
		}
		seed := NewSeed()
		if err := dead.Setup(ctx, seed.Commitment(), time.Minute); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := dead.Join(ctx, fmt.Sprintf("u%d", i), now); err != nil {
				t.Fatal(err)
			}
		}
		// The first step of Open, then the instance dies.
		if err := freezeScript.Run(ctx, dead.rdb, []string{dead.k.meta}, seed.Commitment()).Err(); err != nil {
			t.Fatal(err)
		}

		next, err := New(b.Universal(t), 7, &Options{KeyPrefix: b.KeyPrefix})
		if err != nil {
			t.Fatal(err)
		}
		late, err := next.Join(ctx, "late", now)
		if err != nil {
			t.Fatal(err)
		}
		if late.Ticket != 21 || !late.Drawn || late.Position != 21 {
			t.Errorf("join during the opening = %+v, want ticket 21 drawn at position 21", late)
		}
		m, err := next.Mark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := next.Admit(ctx, now.Add(999*time.Millisecond), m, 100, 100); err != nil || len(a.Tickets) != 0 {
			t.Fatalf("Admit with the opening half done = %v, %v; want nobody admitted", a.Tickets, err)
		}
		if err := next.Open(ctx, seed); err != nil {
			t.Fatalf("Open after the crash: %v", err)
		}
		if m, err = next.Mark(ctx); err != nil {
			t.Fatal(err)
		}
		a, err := next.Admit(ctx, now.Add(1999*time.Millisecond), m, 100, 100)
		if err != nil {
			t.Fatal(err)
		}
		pre := make([]int64, 20)
		for i := range pre {
			pre[i] = int64(i + 1)
		}
		st, err := next.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leaves := make([][32]byte, len(pre))
		for i := range leaves {
			leaves[i] = TicketLeaf(DefaultTicketString(int64(i+1), fmt.Sprintf("u%d", i), st.Epoch))
		}
		tr := TranscriptOf(leaves)
		if st.Transcript != tr.String() {
			t.Fatalf("transcript %q, recomputed %s", st.Transcript, tr)
		}
		drawn, _ := DrawOrder(seed, tr, pre)
		if want := append(drawn, 21); !slices.Equal(a.Tickets, want) {
			t.Errorf("served %v, want the draw then the late join: %v", a.Tickets, want)
		}
	})
}
