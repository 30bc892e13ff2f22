package store

import (
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// newTestStore opens a Store on b's database with opts.
func newTestStore(t *testing.T, b testenv.Backend, opts *Options) *Store {
	t.Helper()
	st, err := New(b.DB(t), opts)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	return st
}
