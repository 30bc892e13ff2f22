package store

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A unique-key clash is classified by the key that clashed, read from the
// driver's error number and the index (MySQL) or constraint (SQLite), never
// by searching error text that quotes the user id and the key: ids that
// name the other key must not fool it.
func TestInsertClashClassifiedByIndex(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "dup", Stock: 10, Strategy: stock.StrategyLua}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		order := func(id, user string) *stock.Order { return &stock.Order{ID: id, ItemID: it.ID, UserID: user} }
		const user, key = "orders_item_idem:orders.idempotency_key", "orders_item_user:orders.user_id"
		if err := st.InsertOrder(ctx, OrderWrite{Order: order("00000000-0000-7000-8000-000000000001", user), Key: key}, 0); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name, id, user, key string
			want                error
		}{
			{"same user", "00000000-0000-7000-8000-000000000002", user, "k2", stock.ErrAlreadyPurchased},
			{"same user, no key", "00000000-0000-7000-8000-000000000003", user, "", stock.ErrAlreadyPurchased},
			{"same key", "00000000-0000-7000-8000-000000000004", "orders_item_user", key, stock.ErrIdempotencyConflict},
		}
		for _, tc := range cases {
			err := st.InsertOrder(ctx, OrderWrite{Order: order(tc.id, tc.user), Key: tc.key}, 0)
			if !errors.Is(err, tc.want) || errors.Is(err, stock.ErrUnavailable) {
				t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
			}
		}
		// The same order id twice is neither: it is no business outcome.
		err := st.InsertOrder(ctx, OrderWrite{Order: order("00000000-0000-7000-8000-000000000001", "someone-else")}, 0)
		if err == nil || errors.Is(err, stock.ErrAlreadyPurchased) || errors.Is(err, stock.ErrIdempotencyConflict) {
			t.Errorf("same order id: got %v, want an error that is neither a purchase nor a key clash", err)
		}
		if !isDupKey(err) {
			t.Errorf("same order id: isDupKey(%v) = false, want true", err)
		}
		if got, _ := st.Item(ctx, it.ID); got.Sold != 1 {
			t.Errorf("sold: got %d, want 1", got.Sold)
		}
	})
}

// The index is read from the end of MySQL's message, where the server puts
// it after the quoted entry, in both MariaDB's and MySQL 8's spelling; a
// message without one names no known index.
func TestMySQLDuplicateIndex(t *testing.T) {
	for _, tc := range []struct {
		msg, want string
	}{
		{"Duplicate entry '1-orders_item_idem' for key 'orders_item_user'", "orders_item_user"},
		{"Duplicate entry '1-x' for key 'orders_item_user'' for key 'orders_item_idem'", "orders_item_idem"},
		{"Duplicate entry '7-a' for key 'orders.orders_item_idem'", "orders_item_idem"},
		{"Duplicate entry 'abc' for key 'PRIMARY'", "PRIMARY"},
		{"Duplicate entry", ""},
	} {
		err := &mysql.MySQLError{Number: 1062, Message: tc.msg}
		got, ok := uniqueViolation(err)
		if !ok || got != tc.want {
			t.Errorf("%q: got %q %v, want %q true", tc.msg, got, ok, tc.want)
		}
	}
	if _, ok := uniqueViolation(&mysql.MySQLError{Number: 1452, Message: "for key 'orders_item_user'"}); ok {
		t.Errorf("error 1452 taken for a unique-key violation")
	}
	if _, ok := uniqueViolation(errors.New("UNIQUE constraint failed: orders.item_id, orders.user_id")); ok {
		t.Errorf("a plain error's text taken for a unique-key violation")
	}
}
