package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/stock"
)

// In the embedded default the queue lives in the process's own Redis, which
// closes with it: a graceful shutdown must let the writers write every
// queued lua-async order first, or its 202s are lost.
func TestEmbeddedShutdownWritesTheQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seckill.db")
	// One writer, one order per transaction: a backlog builds up. The
	// drain is bounded by ShutdownTimeout (15 s by default; past it the
	// queue is lost, and logged as such): here it is ten minutes, so what
	// is checked is that the drain writes every queued order, not how fast
	// this machine writes 400 SQLite transactions (CI: 295 left after 15 s
	// beside the rest of the suite).
	cfg := app.Config{SQLitePath: path, Writers: 1, WriterBatch: 1, ShutdownTimeout: 10 * time.Minute}
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	svc := a.Service()
	it, err := svc.CreateItem(ctx, stock.NewItem{Name: "drain", Stock: 1000, Strategy: stock.StrategyLuaAsync})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i := 0; i < 400; i++ {
		o, _, err := svc.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: fmt.Sprintf("User%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == stock.StatusPending {
			accepted++
		}
	}
	st, err := svc.AsyncStats(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued == 0 {
		t.Fatal("nothing queued at shutdown: the test proves nothing")
	}
	t.Logf("%d orders accepted, %d still queued at shutdown", accepted, st.Queued)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	db, _, _, err := database.Open(ctx, "", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}()
	var written, sold int64
	if err := db.Raw("SELECT COUNT(*) FROM orders WHERE item_id = ?", it.ID).Scan(&written).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT sold FROM items WHERE id = ?", it.ID).Scan(&sold).Error; err != nil {
		t.Fatal(err)
	}
	if written != int64(accepted) || sold != int64(accepted) {
		t.Errorf("after a graceful shutdown: %d orders written and %d sold, want all %d accepted (202) orders", written, sold, accepted)
	}
}
