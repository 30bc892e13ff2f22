package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// A lua-async order the database refused after its 202 (status failed) is
// final: paying or cancelling it is 409 order_failed, and a keyed replay
// answers what the failure means (409 sold_out here), never a 2xx, which
// would promise an order.
func TestFailedAsyncOrderAnswers(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.Writers = queue.NoWriters }) // admits, writes nothing
		it := c.CreateItem(t, 5, "lua-async")
		r, err := c.PlaceOrder(it.ID, "Alice", "key-1")
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("order: got %d %s %v, want 202", r.Status, r.Body, err)
		}
		var o apptest.Order
		r.JSON(t, &o)
		// The database loses the stock behind the gate's back (as after
		// Redis lost data and a stock change): the writers refuse the order.
		if err := b.DB(t).Exec("UPDATE items SET stock = 0 WHERE id = ?", it.ID).Error; err != nil {
			t.Fatal(err)
		}
		apptest.Start(t, b) // with writers
		got := c.AwaitOrder(t, o.ID, 15*time.Second)
		if got.Status != "failed" {
			t.Fatalf("order after the writers: got status %q, want failed", got.Status)
		}

		for _, action := range []string{"pay", "cancel"} {
			r, err := c.SettleOrder(o.ID, action, map[string]string{"user_id": "Alice"}, nil)
			if err != nil || r.Status != http.StatusConflict || r.ErrorCode() != "order_failed" {
				t.Errorf("%s of a failed order: got %d %s %v, want 409 order_failed", action, r.Status, r.Body, err)
			}
		}
		r, err = c.PlaceOrder(it.ID, "Alice", "key-1")
		if err != nil || r.Status != http.StatusConflict || r.ErrorCode() != "sold_out" {
			t.Errorf("keyed replay of an order that failed as sold out: got %d %s %v, want 409 sold_out", r.Status, r.Body, err)
		}
		if got := c.AdminItem(t, it.ID); got.Sold != 0 {
			t.Errorf("sold: got %d, want 0", got.Sold)
		}
	})
}
