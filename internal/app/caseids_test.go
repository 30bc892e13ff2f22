package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// User ids and Idempotency-Keys are byte-exact and case-sensitive on every
// backend: "alice" and "ALICE" are two users, "key-1" and "KEY-1" two keys.
// Redis compares bytes; the database's unique keys must too, or the two
// disagree about who has bought.

// On lua-async both case variants are admitted by the gate; both orders must
// then be written, none dead-lettered, and the item sell exactly its stock.
func TestCaseVariantUsersLuaAsync(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		users := []string{"alice", "ALICE", "Alice"}
		it := c.CreateItem(t, int64(len(users)), "lua-async")
		var ids []string
		for _, u := range users {
			r, err := c.PlaceOrder(it.ID, u, "")
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("order by %s: got %d %s %v, want 202", u, r.Status, r.Body, err)
			}
			var o apptest.Order
			r.JSON(t, &o)
			ids = append(ids, o.ID)
		}
		for i, id := range ids {
			o := c.AwaitOrder(t, id, 30*time.Second)
			if o.Status != "created" || o.UserID != users[i] {
				t.Errorf("order of %s: got status %q user %q, want created for %s", users[i], o.Status, o.UserID, users[i])
			}
		}
		dl := c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d/dead-letters", it.ID), nil, true, nil)
		var dead struct {
			DeadLetters []any `json:"dead_letters"`
		}
		dl.JSON(t, &dead)
		if dl.Status != http.StatusOK || len(dead.DeadLetters) != 0 {
			t.Errorf("dead letters: got %d %s, want 200 and none", dl.Status, dl.Body)
		}
		if r, _ := c.PlaceOrder(it.ID, "aLICE", ""); r.Status != http.StatusConflict || r.ErrorCode() != "sold_out" {
			t.Errorf("a fourth user: got %d %s, want 409 sold_out", r.Status, r.Body)
		}
		if got := c.AdminItem(t, it.ID); got.Sold != got.Stock || got.Remaining != 0 {
			t.Errorf("item: got sold %d of %d, remaining %d; want it sold out exactly", got.Sold, got.Stock, got.Remaining)
		}
		var rows int64
		if err := b.DB(t).Raw("SELECT COUNT(*) FROM orders WHERE item_id = ? AND status = 'created'", it.ID).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if rows != int64(len(users)) {
			t.Errorf("created orders in the database: got %d, want %d", rows, len(users))
		}
	})
}

// On lua and lock "ALICE" buys after "alice", and "ALICE" still gets her own
// order when Redis has forgotten the buyers (the database decides then).
func TestCaseVariantUsersSync(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Redis(t)
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 5, strategy)
				for _, u := range []string{"alice", "ALICE"} {
					if r, err := c.PlaceOrder(it.ID, u, ""); err != nil || r.Status != http.StatusCreated {
						t.Errorf("order by %s: got %d %s %v, want 201", u, r.Status, r.Body, err)
					}
				}
				tag := fmt.Sprintf("%s:{item:%d}", b.KeyPrefix, it.ID)
				rdb.Del(context.Background(), tag+":buyers")
				if r, _ := c.PlaceOrder(it.ID, "aLiCe", ""); r.Status != http.StatusCreated {
					t.Errorf("order by aLiCe after Redis lost the buyers: got %d %s, want 201", r.Status, r.Body)
				}
				// The same bytes are still one user.
				if r, _ := c.PlaceOrder(it.ID, "ALICE", ""); r.Status != http.StatusConflict || r.ErrorCode() != "already_purchased" {
					t.Errorf("ALICE again: got %d %s, want 409 already_purchased", r.Status, r.Body)
				}
				if got := c.AdminItem(t, it.ID); got.Sold != 3 || got.Remaining != 2 {
					t.Errorf("item: got sold %d remaining %d, want 3 and 2", got.Sold, got.Remaining)
				}
			})
		}
	})
}

// A key used by one user does not block its case variant used by another,
// on any strategy, with Redis holding the claim or not; the same key is
// still replayed to its owner and refused to another user. On a Redis
// Cluster too.
func TestCaseVariantIdempotencyKeys(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Universal(t)
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				want := http.StatusCreated
				if strategy == "lua-async" {
					want = http.StatusAccepted
				}
				it := c.CreateItem(t, 5, strategy)
				first, _ := c.PlaceOrder(it.ID, "alice", "key-1")
				if first.Status != want {
					t.Fatalf("alice with key-1: got %d %s, want %d", first.Status, first.Body, want)
				}
				var orig apptest.Order
				first.JSON(t, &orig)
				bob, _ := c.PlaceOrder(it.ID, "bob", "KEY-1")
				if bob.Status != want {
					t.Fatalf("bob with KEY-1: got %d %s, want %d", bob.Status, bob.Body, want)
				}
				var bobs apptest.Order
				bob.JSON(t, &bobs)
				if r, _ := c.PlaceOrder(it.ID, "carol", "key-1"); r.Status != http.StatusUnprocessableEntity {
					t.Errorf("carol with alice's key-1: got %d %s, want 422", r.Status, r.Body)
				}
				replay, _ := c.PlaceOrder(it.ID, "alice", "key-1")
				var again apptest.Order
				replay.JSON(t, &again)
				if again.ID != orig.ID {
					t.Errorf("alice replaying key-1: got %d %s, want order %s", replay.Status, replay.Body, orig.ID)
				}
				for _, id := range []string{orig.ID, bobs.ID} {
					if o := c.AwaitOrder(t, id, 30*time.Second); o.Status != "created" {
						t.Errorf("order %s of %s: got status %q, want created", id, o.UserID, o.Status)
					}
				}
				// Without Redis's claims the database decides, byte-exact too.
				tag := fmt.Sprintf("%s:{item:%d}", b.KeyPrefix, it.ID)
				if err := rdb.Del(context.Background(), tag+":idem:key-1", tag+":idem:KEY-1").Err(); err != nil {
					t.Fatalf("lose the claims: %v", err)
				}
				if r, _ := c.PlaceOrder(it.ID, "dave", "Key-1"); r.Status != want {
					t.Errorf("dave with Key-1 after Redis lost the claims: got %d %s, want %d", r.Status, r.Body, want)
				}
			})
		}
	})
}

// A clash in the database is classified by the key that clashed, never by
// searching the error text, which quotes the user id and key: a user whose
// id names the other key still gets already_purchased, and a key naming the
// user key still gets idempotency_conflict.
func TestDuplicateKeyClassifiedByIndex(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Redis(t)
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 5, strategy)
				tag := fmt.Sprintf("%s:{item:%d}", b.KeyPrefix, it.ID)
				const user, key = "orders_item_idem", "orders_item_user:orders.user_id"
				if r, _ := c.PlaceOrder(it.ID, user, key); r.Status != http.StatusCreated {
					t.Fatalf("first order: got %d %s, want 201", r.Status, r.Body)
				}
				// Redis forgets, so the database's unique keys decide.
				rdb.Del(context.Background(), tag+":buyers", tag+":idem:"+key)
				if r, _ := c.PlaceOrder(it.ID, user, ""); r.Status != http.StatusConflict || r.ErrorCode() != "already_purchased" {
					t.Errorf("same user again: got %d %s, want 409 already_purchased", r.Status, r.Body)
				}
				rdb.Del(context.Background(), tag+":buyers", tag+":idem:"+key)
				if r, _ := c.PlaceOrder(it.ID, "orders.user_id", key); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "idempotency_conflict" {
					t.Errorf("another user, same key: got %d %s, want 422 idempotency_conflict", r.Status, r.Body)
				}
				if got := c.AdminItem(t, it.ID); got.Sold != 1 || got.Remaining != 4 {
					t.Errorf("item: got sold %d remaining %d, want 1 and 4", got.Sold, got.Remaining)
				}
			})
		}
	})
}

// stampedeUser is the user of the stampede's n-th attempt (n from 1): pairs
// that differ only in case, "u00001" and "U00001", two users.
func stampedeUser(n int64) string {
	u := fmt.Sprintf("u%05d", (n+1)/2)
	if n%2 == 0 {
		u = strings.ToUpper(u)
	}
	return u
}
