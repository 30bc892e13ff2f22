package rooms

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A buyer joins through one instance and polls through another that has
// not reloaded the rooms since the room was made (it reloads every
// Config.Reload, here an hour): the poll learns the room and answers the
// ticket's state, not 404 (the load harness met this: a buyer told its
// ticket does not exist stops polling, and its pass, once admitted, went
// unused). A ticket of a room that is gone stays not found, and a forged
// one is refused.
func TestPollThroughAnInstanceThatHasNotLoadedTheRoom(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	key := make([]byte, 32)
	start := func() *Service {
		s, err := New(ctx, db, b.Universal(t), noShop{}, nil, Config{Key: key, KeyPrefix: b.KeyPrefix,
			Tick: 10 * time.Millisecond, Reload: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Close)
		return s
	}
	joiner, poller := start(), start() // both have loaded the rooms once, before this one existed

	id := storeRoom(t, db)
	now := time.Now().UTC()
	opens := now.Add(time.Hour)
	v := &stock.ItemView{ID: id, Remaining: 10, StartsAt: &opens}

	joiner.Learn(ctx, id)
	tk, err := joiner.Join(ctx, v, "buyer-1")
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if poller.Roomed(id) {
		t.Fatal("the polling instance knows the room already: the test needs one that does not")
	}
	got, err := poller.Status(ctx, v, tk.Ticket)
	if err != nil {
		t.Fatalf("poll through the other instance: %v, want the ticket's state", err)
	}
	if got.Number != tk.Number || got.State != room.StateWaiting {
		t.Errorf("poll through the other instance: ticket %d %s, want %d waiting", got.Number, got.State, tk.Number)
	}

	if _, err := poller.Status(ctx, v, tk.Ticket[:len(tk.Ticket)-2]+"AA"); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("forged ticket: %v, want not found", err)
	}
	// The room turned off (its row gone): a third instance that never knew
	// it learns nothing and answers not found.
	if err := db.Where("item_id = ?", id).Delete(&row{}).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := start().Status(ctx, v, tk.Ticket); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("ticket of a room that is gone: %v, want not found", err)
	}
}

// A join through an instance that has not loaded a room made a moment ago
// learns it (LearnUnproven) instead of answering "no waiting room"; with
// nothing to show an item has a room, such reloads come at most every
// minUnprovenGap, so joins of items without one cannot make every request
// a database read.
func TestJoinLearnsARoomAtMostEveryGap(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s := startRooms(t, b, Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	// Rooms stored after s loaded the rooms, as through another instance.
	first, second := storeRoom(t, db), storeRoom(t, db)
	s.LearnUnproven(ctx, first)
	if !s.Roomed(first) {
		t.Fatal("a join's LearnUnproven did not learn a room made since the last reload")
	}
	third := storeRoom(t, db)
	s.LearnUnproven(ctx, third)
	if s.Roomed(third) {
		t.Errorf("a second LearnUnproven within %v reloaded the rooms", minUnprovenGap)
	}
	if !s.Roomed(second) {
		t.Error("the first reload missed a room made before it")
	}
	clock.Add(int64(minUnprovenGap))
	s.LearnUnproven(ctx, third)
	if !s.Roomed(third) {
		t.Errorf("LearnUnproven %v after the last did not reload", minUnprovenGap)
	}
}

// Polls of a signed ticket whose room this process does not know (turned
// off, redteam's learn_amplify.py: each poll reloaded every room from the
// database) reload at most every minUnprovenGap: one such poll learns and
// answers not found, the others within the gap answer 503 (retry), with no
// reload, and a poll after the gap reloads again.
func TestPollsOfAGoneRoomReloadAtMostEveryGap(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	start := func(now func() time.Time) *Service {
		s, err := New(ctx, db, b.Universal(t), noShop{}, nil, Config{Key: make([]byte, 32), KeyPrefix: b.KeyPrefix,
			Tick: 10 * time.Millisecond, Reload: time.Hour, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Close)
		return s
	}
	joiner := start(time.Now)
	id := storeRoom(t, db)
	opens := time.Now().UTC().Add(time.Hour)
	v := &stock.ItemView{ID: id, Remaining: 10, StartsAt: &opens}
	joiner.Learn(ctx, id)
	tk, err := joiner.Join(ctx, v, "buyer-1")
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := db.Where("item_id = ?", id).Delete(&row{}).Error; err != nil { // turned off
		t.Fatal(err)
	}
	poller := start(func() time.Time { return time.Unix(0, clock.Load()) })
	if _, err := poller.Status(ctx, v, tk.Ticket); !errors.Is(err, stock.ErrNotFound) {
		t.Fatalf("first poll of a gone room's ticket: %v, want not found", err)
	}
	later := storeRoom(t, db) // a room a reload would now find
	for i := range 50 {
		if _, err := poller.Status(ctx, v, tk.Ticket); !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("poll %d within the gap: %v, want 503 unavailable (retry) without a reload", i, err)
		}
	}
	if poller.Roomed(later) {
		t.Fatalf("polls within %v of the last reload reloaded the rooms", minUnprovenGap)
	}
	clock.Add(int64(minUnprovenGap))
	if _, err := poller.Status(ctx, v, tk.Ticket); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("poll after the gap: %v, want not found", err)
	}
	if !poller.Roomed(later) {
		t.Errorf("a poll %v after the last reload did not reload", minUnprovenGap)
	}
}
