package room_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv"
)

// t0 is the injected clock's start: a whole second, so offsets read as ms.
var t0 = time.Unix(1_900_000_000, 0)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var nextItem atomic.Int64

// env is one backend's Redis and a fresh item id under the test's prefix.
type env struct {
	b      testenv.Backend
	rdb    redis.UniversalClient
	prefix string
	item   int64
}

// forEachRedis runs fn on the embedded Redis, the machine's Redis and the
// local Redis Cluster, each with its own key prefix.
func forEachRedis(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		fn(t, env{b: b, rdb: b.Universal(t), prefix: b.KeyPrefix, item: 100 + nextItem.Add(1)})
	})
}

// forEachRealRedis is forEachRedis without the embedded Redis.
func forEachRealRedis(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	for name, open := range map[string]func(testing.TB) testenv.Backend{"mariadb": testenv.Real, "cluster": testenv.Cluster} {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			fn(t, env{b: b, rdb: b.Universal(t), prefix: b.KeyPrefix, item: 100 + nextItem.Add(1)})
		})
	}
}

// room opens the env's item's room through a client of its own: a second
// call is a second "instance".
func (e env) room(t testing.TB, opt *room.Options) *room.Room {
	t.Helper()
	o := room.Options{KeyPrefix: e.prefix}
	if opt != nil {
		o = *opt
		o.KeyPrefix = e.prefix
	}
	r, err := room.New(e.b.Universal(t), e.item, &o)
	if err != nil {
		t.Fatalf("room.New: %v", err)
	}
	return r
}

// setUp creates the room with seed's commitment.
func setUp(t testing.TB, r *room.Room, seed room.Seed, ttl time.Duration) {
	t.Helper()
	if err := r.Setup(context.Background(), seed.Commitment(), ttl); err != nil {
		t.Fatalf("Setup: %v", err)
	}
}

func join(t testing.TB, r *room.Room, user string, now time.Time) room.Status {
	t.Helper()
	s, err := r.Join(context.Background(), user, now)
	if err != nil {
		t.Fatalf("Join(%s): %v", user, err)
	}
	return s
}

func status(t testing.TB, r *room.Room, ticket int64, now time.Time) room.Status {
	t.Helper()
	s, err := r.Status(context.Background(), ticket, now)
	if err != nil {
		t.Fatalf("Status(%d): %v", ticket, err)
	}
	return s
}

// mark reads r's Redis clock (room.Mark).
func mark(t testing.TB, r *room.Room) room.Mark {
	t.Helper()
	m, err := r.Mark(context.Background())
	if err != nil {
		t.Fatalf("Mark: %v", err)
	}
	return m
}

// markAfter is a mark strictly after every pass spent before the call: the
// room's clock counts milliseconds, and a pass spent in the mark's
// millisecond counts as spent after it (it might have been). It waits for
// the clock to tick past the first mark.
func markAfter(t testing.TB, r *room.Room) room.Mark {
	t.Helper()
	first := mark(t, r)
	for {
		if m := mark(t, r); m.Time().After(first.Time()) {
			return m
		}
	}
}

// admit admits with a mark taken now (after every pass spent before the
// call): maxUnused is a figure of the remaining stock read after them.
func admit(t testing.TB, r *room.Room, now time.Time, rate, maxUnused int) room.Admission {
	t.Helper()
	return admitSince(t, r, now, markAfter(t, r), rate, maxUnused)
}

// admitSince admits with the mark m: maxUnused was read after m.
func admitSince(t testing.TB, r *room.Room, now time.Time, m room.Mark, rate, maxUnused int) room.Admission {
	t.Helper()
	a, err := r.Admit(context.Background(), now, m, rate, maxUnused)
	if err != nil {
		t.Fatalf("Admit(%v, %d, %d): %v", now.Sub(t0), rate, maxUnused, err)
	}
	return a
}

// joinUsers joins n users u1..un in order and returns their tickets.
func joinUsers(t testing.TB, r *room.Room, from, n int, now time.Time) []int64 {
	t.Helper()
	var tickets []int64
	for i := from; i < from+n; i++ {
		tickets = append(tickets, join(t, r, fmt.Sprintf("u%d", i), now).Ticket)
	}
	return tickets
}

// joinMany joins n users from 8 goroutines, when their order does not matter.
func joinMany(t testing.TB, r *room.Room, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := r.Join(context.Background(), fmt.Sprintf("m%d", i), t0); err != nil {
					t.Errorf("Join: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func wantTickets(t testing.TB, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// drawnOrder is the order the draw gives r's pre-queue of users u1..un
// (joinUsers from 1), recomputed from the outside: each ticket's leaf from
// its default ticket string and the room's epoch, their transcript, which
// must be the one the room published.
func drawnOrder(t testing.TB, r *room.Room, seed room.Seed, n int64) []int64 {
	t.Helper()
	st, err := r.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leaves := make([][32]byte, n)
	for i := range leaves {
		leaves[i] = room.TicketLeaf(room.DefaultTicketString(int64(i+1), fmt.Sprintf("u%d", i+1), st.Epoch))
	}
	tr := room.TranscriptOf(leaves)
	if st.Transcript != tr.String() {
		t.Fatalf("room's transcript %q, recomputed from its tickets %s", st.Transcript, tr)
	}
	order, err := room.DrawOrder(seed, tr, seq(1, n))
	if err != nil {
		t.Fatal(err)
	}
	return order
}
