package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// The bare writer sells like the strategies' writer: 24 buyers at once on
// 10 units sell exactly 10, the rest hear sold out; the fenced one writes
// fences, and after a fence newer than its counter (another holder's) it
// raises its counter above it and writes, as the lock strategy does.
func TestBareWriter(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, fenced := range []bool{false, true} {
			ctx := context.Background()
			st := newTestStore(t, b, nil)
			it := &stock.Item{Name: fmt.Sprintf("bare-%v", fenced), Stock: 10, Strategy: stock.StrategyLua}
			if fenced {
				it.Strategy = stock.StrategyLock
			}
			if err := st.CreateItem(ctx, it, nil); err != nil {
				t.Fatal(err)
			}
			if fenced { // another holder wrote with fence 100
				if err := st.InsertOrder(ctx, store.OrderWrite{Order: &stock.Order{ID: uuid.Must(uuid.NewV7()).String(), ItemID: it.ID, UserID: "other"}}, 100); err != nil {
					t.Fatal(err)
				}
			}
			w := NewBareWriter(st, fenced)
			var wg sync.WaitGroup
			results := make([]error, 24)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = w.Write(ctx, &stock.Order{ID: uuid.Must(uuid.NewV7()).String(), ItemID: it.ID, UserID: fmt.Sprintf("u%d", i)}, "")
				}()
			}
			wg.Wait()
			w.Close()
			ok, soldOut := 0, 0
			for _, err := range results {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, stock.ErrSoldOut):
					soldOut++
				default:
					t.Errorf("fenced %v: %v", fenced, err)
				}
			}
			want := 10
			if fenced {
				want = 9
			}
			if ok != want || soldOut != 24-want {
				t.Errorf("fenced %v: %d written, %d sold out; want %d and %d", fenced, ok, soldOut, want, 24-want)
			}
			if got, err := st.Item(ctx, it.ID); err != nil || got.Sold != 10 {
				t.Errorf("fenced %v: item %+v (%v), want 10 sold", fenced, got, err)
			}
			fence, err := st.LockFence(ctx, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if fenced && fence <= 100 || !fenced && fence != 0 {
				t.Errorf("fenced %v: lock_fence %d; want above 100 when fenced, else 0", fenced, fence)
			}
		}
	})
}
