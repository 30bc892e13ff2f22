package store

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A SQLite statement whose context ends mid-way is interrupted: the driver
// answers SQLITE_INTERRUPT ("interrupted (9)"), not the context's error.
// That is the database not answering in time (an item lock's lease
// lapsing under a write, a request's deadline), so it is ErrUnavailable, a
// 503, as a MySQL timeout is; it was an internal error, and a buyer behind
// a starved lock was answered 500 (TestExpiryRacesPayment's late buyers
// saw "insert order: interrupted (9)").
func TestInterruptedSQLiteStatementIsUnavailable(t *testing.T) {
	t.Parallel()
	st := newTestStore(t, testenv.Embedded(t), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// A write that counts far past the deadline.
	_, err := st.sql.ExecContext(ctx, `CREATE TEMP TABLE counted AS WITH RECURSIVE c(x) AS
		(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) AS n FROM c`)
	if err == nil {
		t.Fatal("the count ended before its deadline")
	}
	t.Logf("the statement's error: %v", err)
	if got := dbError("count", err); !errors.Is(got, stock.ErrUnavailable) {
		t.Errorf("interrupted statement: got %v, want ErrUnavailable", got)
	}
}

// A transaction whose context ends after its last statement is rolled back
// by database/sql before COMMIT is sent; Commit then answers ErrTxDone.
// Nothing was written and the database was too slow: ErrUnavailable (a
// 503, the reservation handed back), not a commit of unknown outcome and
// not an internal error. A stalled database answered a buyer 500
// ("commit: sql: transaction has already been committed or rolled back")
// in TestStalledBackends before.
func TestContextEndedBeforeCommitIsUnavailable(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "late commit", Stock: 3, Strategy: stock.StrategyLua}
		if err := st.CreateItem(context.Background(), it, nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := st.inTx(ctx, nil, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE items SET sold = sold + 1 WHERE id = ?", it.ID); err != nil {
				return err
			}
			cancel()
			// Wait until database/sql has rolled the transaction back.
			for {
				_, err := tx.ExecContext(context.Background(), "SELECT 1")
				if errors.Is(err, sql.ErrTxDone) {
					return nil
				}
				runtime.Gosched()
			}
		})
		if !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, errCommit) {
			t.Fatalf("commit after the context ended: %v; want ErrUnavailable, not a commit of unknown outcome", err)
		}
		got, err := st.Item(context.Background(), it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sold != 0 {
			t.Errorf("sold %d after the rolled-back transaction, want 0", got.Sold)
		}
	})
}
