package shop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// TestLateCommitHandedBackAndCancelledReturnsOneUnit: a lua write whose
// commit was held in a stalled connection is heard as failed, so its
// reservation is handed back (resolve, after the database twice said the
// order is not there); then the commit lands, and the order is cancelled,
// which releases its unit. Or the hand-back's retries outlast the commit
// and the cancellation. Either way the unit comes back to the gate once:
// it ends with as many free units as the database has. On an item with
// several buckets the buyer's home bucket and the order's release bucket
// differ here; before, the hand-back checked the home bucket's released
// set, the release the other one, and the gate gained a unit.
func TestLateCommitHandedBackAndCancelledReturnsOneUnit(t *testing.T) {
	type step func(ctx context.Context, s *Service, home gate.Bucket, o *stock.Order) error
	handBack := func(ctx context.Context, s *Service, home gate.Bucket, o *stock.Order) error {
		_, err := s.lua.handBackNow(ctx, home, o.UserID, o.ID, "")
		return err
	}
	commit := func(ctx context.Context, s *Service, home gate.Bucket, o *stock.Order) error {
		return s.lua.writer.write(ctx, o, "", false, home.K, nil)
	}
	cancel := func(ctx context.Context, s *Service, _ gate.Bucket, o *stock.Order) error {
		_, err := s.CancelOrder(ctx, o.ID, o.UserID)
		return err
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"hand-back, commit, cancel", []step{handBack, commit, cancel}},
		{"commit, cancel, hand-back", []step{commit, cancel, handBack}},
	}
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, k := range []int{1, 3} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("buckets=%d/%s", k, c.name), func(t *testing.T) {
					ctx := context.Background()
					s := newTestService(t, b, Config{}, nil)
					const units = 4
					it, err := s.CreateItem(ctx, stock.NewItem{Name: "late", Stock: units, Strategy: stock.StrategyLua, Buckets: k})
					if err != nil {
						t.Fatal(err)
					}
					o := &stock.Order{ItemID: it.ID, UserID: "alice"}
					home := gate.HomeBucket(it.ID, k, o.UserID)
					for o.ID == "" || (k > 1 && gate.ReleaseBucket(it.ID, k, o.ID) == home) {
						id, err := uuid.NewV7()
						if err != nil {
							t.Fatal(err)
						}
						o.ID = id.String()
					}
					if _, err := s.gate.Reserve(ctx, home, o.UserID, o.ID, time.Now(), nil); err != nil {
						t.Fatal(err)
					}
					for _, st := range c.steps {
						if err := st(ctx, s, home, o); err != nil {
							t.Fatal(err)
						}
					}
					db, err := s.store.Item(ctx, it.ID)
					if err != nil {
						t.Fatal(err)
					}
					v, err := s.gate.ReadBuckets(ctx, it.ID, k, false)
					if err != nil {
						t.Fatal(err)
					}
					if want := db.Stock - db.Sold; v.Free != want {
						t.Errorf("buckets=%d: the gate has %d units free, the database %d (stock %d, sold %d)", k, v.Free, want, db.Stock, db.Sold)
					}
				})
			}
		}
	})
}
