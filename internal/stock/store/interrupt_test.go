package store

import (
	"context"
	"errors"
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
