package store

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestStore opens a Store on b's database with opts.
func newTestStore(t *testing.T, b testenv.Backend, opts *Options) *Store {
	t.Helper()
	st, err := New(b.DB(t), opts)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	return st
}
