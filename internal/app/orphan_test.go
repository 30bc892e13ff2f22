package app_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// uuidV7At makes a version-7 UUID whose timestamp is t.
func uuidV7At(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[0:6], ms[2:8])
	return u.String()
}

// A service that died between the Lua gate and the commit leaves a
// reservation with no order. An old one is handed back when its user comes
// back, so neither the user nor the unit is lost; a fresh one may still be
// in flight and is left alone.
func TestOrphanedReservationIsHandedBack(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Redis(t)
		ctx := context.Background()
		it := c.CreateItem(t, 2, "lua")
		tag := fmt.Sprintf("%s:{item:%d}", b.KeyPrefix, it.ID)
		// What the reserve script leaves behind, as a crashed writer would.
		crash := func(user, orderID string) {
			t.Helper()
			if err := rdb.HIncrBy(ctx, tag+":meta", "taken", 1).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.HSet(ctx, tag+":buyers", user, orderID).Err(); err != nil {
				t.Fatal(err)
			}
		}
		crash("crashed-long-ago", uuidV7At(time.Now().Add(-2*time.Minute)))
		crash("crashed-just-now", uuidV7At(time.Now()))

		if r, _ := c.PlaceOrder(it.ID, "crashed-just-now", ""); r.Status != 409 || r.ErrorCode() != "already_purchased" {
			t.Errorf("user with a fresh reservation: got %d %s, want 409 already_purchased (it may be in flight)", r.Status, r.Body)
		}
		if r, _ := c.PlaceOrder(it.ID, "crashed-long-ago", ""); r.Status != 201 {
			t.Errorf("user with an orphaned reservation: got %d %s, want 201", r.Status, r.Body)
		}
		taken, _ := rdb.HGet(ctx, tag+":meta", "taken").Int()
		if taken != 2 {
			t.Errorf("gate taken: got %d, want 2 (the orphan returned, the new order and the fresh reservation held)", taken)
		}
		if got := c.AdminItem(t, it.ID); got.Sold != 1 {
			t.Errorf("sold: got %d, want 1", got.Sold)
		}
	})
}
