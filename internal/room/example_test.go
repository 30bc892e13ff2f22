package room_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/room"
)

// The embedded Redis, as the service's default runs it.
func exampleRedis() (*redis.Client, func()) {
	m, err := embedredis.Start()
	if err != nil {
		panic(err)
	}
	opt, err := redis.ParseURL(m.URL())
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(opt)
	return rdb, func() { _ = rdb.Close(); m.Close() }
}

func Example() {
	ctx := context.Background()
	rdb, done := exampleRedis()
	defer done()
	key := room.GeneratePassKey() // configure one shared key in production
	r, err := room.New(rdb, 42, &room.Options{PassKey: key})
	if err != nil {
		panic(err)
	}

	// Before the sale: publish the commitment, keep the seed secret.
	seed := room.NewSeed()
	if err := r.Setup(ctx, seed.Commitment(), time.Minute); err != nil {
		panic(err)
	}
	now := time.Unix(1_900_000_000, 0)
	for _, u := range []string{"ann", "ben", "cat"} {
		s, _ := r.Join(ctx, u, now)
		fmt.Printf("%s: ticket %d, %s, drawn %v\n", u, s.Ticket, s.State, s.Drawn)
	}
	again, _ := r.Join(ctx, "ben", now)
	fmt.Println("ben again: ticket", again.Ticket)

	// The opening: the draw orders the pre-queue and the seed is revealed.
	if err := r.Open(ctx, seed); err != nil {
		panic(err)
	}
	// Each round: a mark on the room's Redis clock, then the remaining
	// stock, then Admit: 2 a second, at most 10 live passes.
	m, _ := r.Mark(ctx)
	a, _ := r.Admit(ctx, now.Add(999*time.Millisecond), m, 2, 10)
	fmt.Println("admitted:", len(a.Tickets))

	s, _ := r.Status(ctx, a.Tickets[0], now.Add(time.Second))
	_, err = key.Verify(s.Pass, 42, s.User, now.Add(time.Second))
	fmt.Println("first admitted:", s.State, "pass ok:", err == nil)

	d, _ := r.Draw(ctx)
	c, _ := d.Verify()
	fmt.Println("draw verifies:", c.OK())
	// Output:
	// ann: ticket 1, waiting, drawn false
	// ben: ticket 2, waiting, drawn false
	// cat: ticket 3, waiting, drawn false
	// ben again: ticket 2
	// admitted: 2
	// first admitted: admitted pass ok: true
	// draw verifies: true
}

func ExampleVerifyDraw() {
	var seed room.Seed // all zero, for a fixed output
	pre := []int64{1, 2, 3, 4, 5}
	var leaves [][32]byte // each pre-queue ticket's string, hashed
	for _, t := range pre {
		leaves = append(leaves, room.TicketLeaf(fmt.Sprintf("ticket %d", t)))
	}
	tr := room.TranscriptOf(leaves)
	order, _ := room.DrawOrder(seed, tr, pre)
	fmt.Println(order)

	c := room.VerifyDraw(seed, seed.Commitment(), tr, leaves, pre, order[:2])
	fmt.Println("prefix served:", c.OK())

	c = room.VerifyDraw(seed, seed.Commitment(), tr, leaves, pre, []int64{order[1], order[0]})
	fmt.Println("swapped:", c.OK(), "first mismatch at", c.Mismatch)
	// Output:
	// [3 1 2 5 4]
	// prefix served: true
	// swapped: false first mismatch at 0
}

func ExamplePassKey_Verify() {
	key, _ := room.ParsePassKey("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	exp := time.Unix(1_900_000_060, 0)
	pass, _ := key.Issue(room.Pass{ItemID: 42, UserID: "ann", Ticket: 7, Expiry: exp})

	now := time.Unix(1_900_000_000, 0)
	p, err := key.Verify(pass, 42, "ann", now)
	fmt.Println(p.Ticket, err)
	_, err = key.Verify(pass, 42, "ben", now)
	fmt.Println(err)
	_, err = key.Verify(pass, 42, "ann", exp)
	fmt.Println(err)
	// Output:
	// 7 <nil>
	// room: pass rejected: issued to another user
	// room: pass rejected: expired
}
