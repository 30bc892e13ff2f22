package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkRoomCheck measures what the waiting room's check (noRoom) adds
// to the transaction that takes an order's units, on MariaDB: the same
// writes with every order carrying a pass (no check) and with none (the
// check, as for every order of an item without a room), interleaved
// transaction by transaction so that both see the same load on a shared
// machine. It reports each one's mean time per transaction.
//
//	go test -run XXX -bench RoomCheck -benchtime 4000x ./internal/stock/store/
func BenchmarkRoomCheck(b *testing.B) {
	be := testenv.Real(b)
	st, err := New(be.DB(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", k), func(b *testing.B) {
			it := &stock.Item{Name: "bench", Stock: stock.MaxStock, Strategy: stock.StrategyLua}
			if err := st.CreateItem(ctx, it, nil); err != nil {
				b.Fatal(err)
			}
			var spent [2]time.Duration
			var n [2]int
			b.ResetTimer()
			for i := range b.N {
				pass := i%2 == 0
				batch := make([]OrderWrite, k)
				for j := range batch {
					batch[j] = OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: uuid.NewString()}, Pass: pass}
				}
				start := time.Now()
				if k == 1 {
					err = st.InsertOrder(ctx, batch[0], 0)
				} else {
					err = st.InsertBatch(ctx, batch, Now(), 0, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				v := 0
				if !pass {
					v = 1
				}
				spent[v] += time.Since(start)
				n[v]++
			}
			b.StopTimer()
			if n[0] > 0 && n[1] > 0 {
				b.ReportMetric(float64(spent[0].Microseconds())/float64(n[0]), "µs/tx-pass")
				b.ReportMetric(float64(spent[1].Microseconds())/float64(n[1]), "µs/tx-checked")
			}
		})
	}
}
