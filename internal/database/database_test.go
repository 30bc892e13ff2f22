package database_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/database"
)

// Opens of one new SQLite file at once (instances starting together, or
// tests sharing a backend) migrate it one at a time: every open succeeds
// and exactly one applies the migrations. Without the lock two of them
// applied migration 2 and one failed: "duplicate column name: expires_at"
// (TestRepeatBuyerRefusedFromMemory in CI).
func TestConcurrentOpensOfOneSQLiteFile(t *testing.T) {
	t.Parallel()
	for round := range 5 { // the race without the lock shows in most rounds, not all
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seckill.db")
			const opens = 4
			errs := make([]error, opens)
			applied := make([][]int64, opens)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range opens {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					db, _, a, err := database.Open(context.Background(), "", path)
					applied[i], errs[i] = a, err
					if err == nil {
						if sqlDB, err := db.DB(); err == nil {
							_ = sqlDB.Close()
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			ran := 0
			for i, err := range errs {
				if err != nil {
					t.Errorf("open %d: %v", i, err)
				}
				if len(applied[i]) > 0 {
					ran++
				}
			}
			if ran != 1 {
				t.Errorf("%d opens applied migrations (%v), want exactly one", ran, applied)
			}
		})
	}
}
