package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// A room turned on at one instance holds at every other one from the
// moment its PUT (or the item's creation) answered, before the others
// reload their rooms: an order without a pass through the second
// instance, at once, is 403 pass_required and changes nothing (no order
// row, sold unchanged, the gate's units and buyers as before, any
// reservation handed back). The second instance then knows the room (its
// public view shows it), and a valid pass still buys there. For every
// strategy, a bucketed lua item, after Redis lost the item's gate (the
// rebuild restores lua-async's room marker from item_rooms), and on a
// Redis Cluster.
func TestRoomOnHoldsAtOnceOnEveryInstance(t *testing.T) {
	t.Parallel()
	for _, open := range []func(testing.TB) testenv.Backend{testenv.Real, testenv.Cluster} {
		b := open(t)
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			a := startRoomApp(t, b)
			c := startRoomApp(t, b)
			rdb := b.Universal(t)
			db := b.DB(t)
			for _, tc := range []struct {
				strategy string
				buckets  int
			}{{"lua", 1}, {"lua", 4}, {"lock", 1}, {"lua-async", 1}} {
				for _, how := range []string{"put", "create", "put after redis lost the gate"} {
					t.Run(fmt.Sprintf("%s/%d buckets/%s", tc.strategy, tc.buckets, how), func(t *testing.T) {
						var id int64
						lost := how == "put after redis lost the gate"
						if how == "create" {
							id = createRoomItem(t, a, 5, map[string]any{"admit_per_second": 10}, func(m map[string]any) {
								m["strategy"] = tc.strategy
								if tc.buckets > 1 {
									m["buckets"] = tc.buckets
								}
							})
						} else {
							id = a.CreateBucketedItem(t, 5, tc.strategy, tc.buckets).ID
							// Known to both instances (routing cached, gate
							// built) before the room turns on.
							if r := orderWithPass(t, c, id, "early", "", ""); r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
								t.Fatalf("order before the room: got %d %s", r.Status, r.Body)
							}
							awaitSold(t, db, id, 1)
							if lost {
								loseGate(t, rdb, b.KeyPrefix, id, tc.buckets)
							}
							r := a.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id), map[string]any{"admit_per_second": 10}, true, nil)
							if r.Status != http.StatusOK {
								t.Fatalf("turn the room on: got %d %s, want 200", r.Status, r.Body)
							}
						}
						before := readGate(t, rdb, b.KeyPrefix, id, tc.buckets)
						sold := soldOf(t, db, id)
						// A user of its own per case: the cases share the
						// per-user rate limit's keys, which a pass-less
						// keyed order takes before its replay read.
						nopass := fmt.Sprintf("nopass-%d", id)

						r := orderWithPass(t, c, id, nopass, "", "")
						wantError(t, "order without a pass at the other instance", r, http.StatusForbidden, "pass_required")
						if r := c.Must(t, "GET", roomPath(id, ""), nil, false, nil); !strings.Contains(string(r.Body), `"waiting_room"`) {
							t.Errorf("the refusing instance's public view right after: %s, want its waiting_room", r.Body)
						}
						r = orderWithPass(t, c, id, nopass, "", "nopass-key")
						wantError(t, "keyed order without a pass, again", r, http.StatusForbidden, "pass_required")

						if n := ordersOf(t, db, id, nopass); n != 0 {
							t.Errorf("refused user has %d order rows, want 0", n)
						}
						if got := soldOf(t, db, id); got != sold {
							t.Errorf("sold %d after the refusal, want %d", got, sold)
						}
						after := readGate(t, rdb, b.KeyPrefix, id, tc.buckets)
						if lost {
							// Rebuilt from the database by the refused order
							// (lua-async) or by the pass's order below.
							before = gateState{taken: sold, buyers: map[string]bool{"early": true}}
							if after.taken == 0 && len(after.buyers) == 0 && !after.present {
								after = before // not rebuilt yet: nothing taken
							}
						}
						if after.taken != before.taken || !sameSet(after.buyers, before.buyers) {
							t.Errorf("gate after the refusal: %+v, want %+v", after, before)
						}
						if streamHas(t, rdb, b.KeyPrefix, id, nopass) {
							t.Errorf("the refused order is queued in the item's stream")
						}

						// A valid pass buys through the other instance.
						pass, err := roomPassKey(t).Issue(room.Pass{ItemID: id, UserID: "passer", Ticket: 1, Expiry: time.Now().Add(time.Minute), Line: roomLine(t, db, id)})
						if err != nil {
							t.Fatal(err)
						}
						if r := orderWithPass(t, c, id, "passer", pass, ""); r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
							t.Errorf("order with a valid pass at the other instance: got %d %s, want 201/202", r.Status, r.Body)
						}
						awaitSold(t, db, id, sold+1)
					})
				}
			}
			// An item created without a room, whose room a third party
			// never turned on, still sells without a pass on both.
			plain := a.CreateItem(t, 2, "lua-async")
			for _, inst := range []*apptest.Client{a, c} {
				if r := orderWithPass(t, inst, plain.ID, fmt.Sprintf("plain-%p", inst), "", ""); r.Status != http.StatusAccepted {
					t.Errorf("order of an item without a room: got %d %s, want 202", r.Status, r.Body)
				}
			}
		})
	}
}

// Turning a room off lets orders without a pass through again, on every
// strategy, once the other instances reloaded (a second at most: until
// then they still ask for a pass, which is safe); lua-async's marker is
// gone from the gate.
func TestRoomOffReachesEveryInstance(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	db := b.DB(t)
	for _, strategy := range []string{"lua", "lock", "lua-async"} {
		t.Run(strategy, func(t *testing.T) {
			id := createRoomItem(t, a, 3, map[string]any{"admit_per_second": 10}, func(m map[string]any) { m["strategy"] = strategy })
			wantError(t, "order without a pass", orderWithPass(t, c, id, "ann", "", ""), http.StatusForbidden, "pass_required")
			r := a.Must(t, "DELETE", fmt.Sprintf("/api/v1/admin/items/%d/waiting-room", id), nil, true, nil)
			if r.Status != http.StatusNoContent {
				t.Fatalf("turn the room off: got %d %s, want 204", r.Status, r.Body)
			}
			if r := orderWithPass(t, a, id, "ann", "", ""); r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
				t.Errorf("order at the instance that turned it off: got %d %s, want 201/202", r.Status, r.Body)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				r := orderWithPass(t, c, id, "ben", "", "")
				if r.Status == http.StatusCreated || r.Status == http.StatusAccepted {
					break
				}
				if r.ErrorCode() != "pass_required" || time.Now().After(deadline) {
					t.Fatalf("order at the other instance after the room is off: got %d %s", r.Status, r.Body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			awaitSold(t, db, id, 2)
		})
	}
}

// An item created with a waiting room is one transaction: when the room's
// row cannot be written, neither is the item (no item on sale without its
// room), and the answer is an error.
func TestRoomCreateIsOneTransaction(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	c := startRoomApp(t, b)
	db := b.DB(t)
	if err := db.Exec("CREATE TRIGGER item_rooms_fail BEFORE INSERT ON item_rooms FOR EACH ROW " +
		"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected: item_rooms refuses rows'").Error; err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"name": "room-fails", "stock": 3, "strategy": "lua", "waiting_room": map[string]any{"admit_per_second": 5}}
	r := c.Must(t, "POST", "/api/v1/admin/items", body, true, nil)
	if r.Status < 500 {
		t.Errorf("create with a room that cannot be stored: got %d %s, want 5xx", r.Status, r.Body)
	}
	var items, rooms int64
	if err := db.Raw("SELECT COUNT(*) FROM items WHERE name = ?", "room-fails").Scan(&items).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*) FROM item_rooms").Scan(&rooms).Error; err != nil {
		t.Fatal(err)
	}
	if items != 0 || rooms != 0 {
		t.Errorf("after the failed create: %d items, %d rooms, want 0 and 0", items, rooms)
	}
	if err := db.Exec("DROP TRIGGER item_rooms_fail").Error; err != nil {
		t.Fatal(err)
	}
	// Without the fault the same request creates both.
	id := createRoomItem(t, c, 3, map[string]any{"admit_per_second": 5})
	wantError(t, "order without a pass", orderWithPass(t, c, id, "ann", "", ""), http.StatusForbidden, "pass_required")
}

// gateState is what an item's gate holds that a sale changes.
type gateState struct {
	present bool
	taken   int64
	buyers  map[string]bool
}

func readGate(t testing.TB, rdb redis.UniversalClient, prefix string, id int64, k int) gateState {
	t.Helper()
	keys := gateKeys(t, prefix)
	ctx := context.Background()
	s := gateState{buyers: map[string]bool{}}
	for _, bk := range gate.AllBuckets(id, k) {
		bks := keys.Bucket(bk)
		taken, err := rdb.HGet(ctx, bks.Meta, "taken").Int64()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			t.Fatal(err)
		default:
			s.present = true
			s.taken += taken
		}
		users, err := rdb.HKeys(ctx, bks.Buyers).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			s.buyers[u] = true
		}
	}
	return s
}

func gateKeys(t testing.TB, prefix string) gate.Keys {
	t.Helper()
	keys, err := gate.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// loseGate deletes what Redis holds of item id (k buckets), as a Redis
// that lost its data would have.
func loseGate(t testing.TB, rdb redis.UniversalClient, prefix string, id int64, k int) {
	t.Helper()
	testenv.DeleteKeys(t, rdb, fmt.Sprintf("%s:{item:%d}*", prefix, id))
	keys := gateKeys(t, prefix)
	for _, bk := range gate.AllBuckets(id, k) {
		testenv.DeleteKeys(t, rdb, fmt.Sprintf("%s:{%s}*", prefix, bk.Tag()))
		if err := rdb.Del(context.Background(), keys.Bucket(bk).Meta).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// streamHas reports whether item id's lua-async stream holds an entry of
// user.
func streamHas(t testing.TB, rdb redis.UniversalClient, prefix string, id int64, user string) bool {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), gateKeys(t, prefix).Stream(id), "-", "+").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Values["u"] == user {
			return true
		}
	}
	return false
}

// soldOf reads the item's sold: its bucket rows' sum when it has several
// buckets (docs/DESIGN.md, "Bucket rows").
func soldOf(t testing.TB, db *gorm.DB, id int64) int64 {
	t.Helper()
	var n int64
	if err := db.Raw("SELECT CASE WHEN buckets > 1 THEN (SELECT SUM(sold) FROM item_stock WHERE item_id = items.id) ELSE sold END FROM items WHERE id = ?", id).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func ordersOf(t testing.TB, db *gorm.DB, id int64, user string) int64 {
	t.Helper()
	var n int64
	if err := db.Raw("SELECT COUNT(*) FROM orders WHERE item_id = ? AND user_id = ?", id, user).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitSold waits until item id's sold reaches n in the database (a
// lua-async order is written by the writers).
func awaitSold(t testing.TB, db *gorm.DB, id, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := soldOf(t, db, id)
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("item %d: sold %d, want %d", id, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
