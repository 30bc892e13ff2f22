package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// insertRoom stores a waiting room of an item as the rooms package does;
// roomArgs are its arguments.
const insertRoom = "INSERT INTO item_rooms (item_id, admit_per_second, pass_ttl_seconds, lottery, paused, seed, commitment, created_at, updated_at) VALUES (?, 10, 60, 1, 0, ?, ?, ?, ?)"

func roomArgs(id int64) []any {
	now := time.Now().UTC()
	return []any{id, fmt.Sprintf("%064d", 0), fmt.Sprintf("%064d", 1), now, now}
}

func addRoom(t *testing.T, st *store.Store, id int64) {
	t.Helper()
	if _, err := rawSQL(t, st).Exec(insertRoom, roomArgs(id)...); err != nil {
		t.Fatal(err)
	}
}

// One group-commit batch of a roomed item, orders with and without a pass
// mixed: those without are refused alone (ErrPassRequired) and the others
// are written, in the same batch's settling; with a lock's fence too.
func TestBatchRefusesOrdersWithoutPassAlone(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, fence := range []int64{0, 7} {
			t.Run(fmt.Sprintf("fence %d", fence), func(t *testing.T) {
				ctx := context.Background()
				st := newTestStore(t, b, nil)
				it := &stock.Item{Name: "roomed", Stock: 10, Strategy: stock.StrategyLua}
				if err := st.CreateItem(ctx, it, nil); err != nil {
					t.Fatal(err)
				}
				addRoom(t, st, it.ID)
				w := newOrderWriter(st, nil)
				defer w.close()
				var batch []*commitRequest
				for i := range 8 {
					batch = append(batch, &commitRequest{o: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: fmt.Sprintf("u%d", i)},
						pass: i%2 == 0, deadline: time.Now().Add(10 * time.Second), done: make(chan error, 1)})
				}
				results := make([]error, len(batch))
				w.writeBatch(ctx, it.ID, batch, allIndexes(len(batch)), results, fence)
				for i, err := range results {
					switch {
					case i%2 == 0 && err != nil:
						t.Errorf("order %d with a pass: got %v, want written", i, err)
					case i%2 == 1 && !errors.Is(err, stock.ErrPassRequired):
						t.Errorf("order %d without a pass: got %v, want ErrPassRequired", i, err)
					}
				}
				got, err := st.Item(ctx, it.ID)
				if err != nil {
					t.Fatal(err)
				}
				var rows int64
				if err := rawSQL(t, st).QueryRow("SELECT COUNT(*) FROM orders WHERE item_id = ?", it.ID).Scan(&rows); err != nil {
					t.Fatal(err)
				}
				if got.Sold != 4 || rows != 4 {
					t.Errorf("sold %d, %d order rows; want 4 and 4", got.Sold, rows)
				}
				// One order alone, without a pass: refused by its own
				// transaction's UPDATE.
				err = st.InsertOrder(ctx, store.OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "alone"}}, fence)
				if !errors.Is(err, stock.ErrPassRequired) {
					t.Errorf("one order without a pass: got %v, want ErrPassRequired", err)
				}
			})
		}
	})
}

// lua-async: the gate's room mark refuses an order without a pass and lets
// one with a pass through; a mark the database does not back (a room
// turned off whose unmarking failed) is cleared by the order it refused,
// which then goes through. ChangeRoom marks and unmarks the gate.
func TestAsyncRoomMark(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		s := newTestServiceOn(t, b, st, Config{}, nil)
		it := createAsyncItem(t, s, 10)
		order := func(user string, pass bool) error {
			_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user, Pass: pass})
			return err
		}
		marked := func() bool {
			v, err := s.rdb.HGet(ctx, s.keys.Meta(it.ID), "room").Result()
			return err == nil && v == "1"
		}

		// A stale mark: no room in the database.
		if err := s.gate.MarkRoom(ctx, it.ID, it.Buckets, true); err != nil {
			t.Fatal(err)
		}
		if err := order("stale", false); err != nil {
			t.Errorf("order under a stale mark: got %v, want admitted", err)
		}
		if marked() {
			t.Errorf("the stale mark is still there")
		}

		// A room turned on through ChangeRoom marks the gate before it returns.
		if err := s.ChangeRoom(ctx, it.ID, func(ctx context.Context, tx *gorm.DB, id int64) error {
			return tx.Exec(insertRoom, roomArgs(id)...).Error
		}); err != nil {
			t.Fatal(err)
		}
		if !marked() {
			t.Fatalf("roomed item's gate is not marked")
		}
		if err := order("nopass", false); !errors.Is(err, stock.ErrPassRequired) {
			t.Errorf("order without a pass: got %v, want ErrPassRequired", err)
		}
		if err := order("passer", true); err != nil {
			t.Errorf("order with a pass: got %v, want admitted", err)
		}

		// Lost with Redis: the rebuild restores the mark.
		if err := s.rdb.Del(ctx, s.keys.Meta(it.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := order("after-loss", false); !errors.Is(err, stock.ErrPassRequired) {
			t.Errorf("order without a pass after the gate was lost: got %v, want ErrPassRequired", err)
		}

		// Turned off: unmarked once committed.
		if err := s.ChangeRoom(ctx, it.ID, func(ctx context.Context, tx *gorm.DB, id int64) error {
			return tx.Exec("DELETE FROM item_rooms WHERE item_id = ?", id).Error
		}); err != nil {
			t.Fatal(err)
		}
		if marked() {
			t.Errorf("gate still marked after the room was turned off")
		}
		if err := order("after-off", false); err != nil {
			t.Errorf("order after the room is off: got %v, want admitted", err)
		}
	})
}
