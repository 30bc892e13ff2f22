package rooms

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// noShop answers nothing: the loops' ticks fail, which is all these tests
// need of them.
type noShop struct{}

var errNoShop = errors.New("no shop in this test")

func (noShop) Item(context.Context, int64) (*stock.Item, error)         { return nil, errNoShop }
func (noShop) ItemView(context.Context, int64) (*stock.ItemView, error) { return nil, errNoShop }
func (noShop) FreshItemView(context.Context, int64) (*stock.ItemView, error) {
	return nil, errNoShop
}
func (noShop) ChangeRoom(context.Context, int64, store.WithItem) error { return errNoShop }
func (noShop) CreateItemWith(context.Context, stock.NewItem, store.WithItem) (*stock.Item, error) {
	return nil, errNoShop
}

// storeRoom stores a room (a new item id's) in the database only, as
// another instance would: the Services of a test learn it by a reload.
func storeRoom(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	id := 900_000 + nextItem.Add(1)
	now := time.Now().UTC()
	r := row{ItemID: id, AdmitPerSecond: 10, PassTTLSeconds: 60, Lottery: true, CreatedAt: now, UpdatedAt: now}
	r.newSeed()
	if err := db.Create(&r).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Where("item_id = ?", id).Delete(&row{}) })
	return id
}

// Once Close has returned, nothing starts a loop any more: an order path
// still running during shutdown that learns a room set up elsewhere
// (Learn, refused: a reload) must not start that room's admission loop
// (its WaitGroup Add would race Close's Wait, and the loop would outlive
// Close).
func TestNoLoopStartsAfterClose(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	s, err := New(ctx, db, b.Universal(t), noShop{}, nil, Config{Key: make([]byte, 32), KeyPrefix: b.KeyPrefix,
		Tick: 10 * time.Millisecond, Reload: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	s.Close()
	id := storeRoom(t, db)
	s.Learn(ctx, id)
	e := s.entry(id)
	if e == nil {
		t.Fatalf("room %d not learned", id)
	}
	if e.cancel != nil {
		t.Errorf("room %d learned after Close has an admission loop", id)
	}
}
