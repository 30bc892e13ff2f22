package room

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
)

// Open opens the room with the draw: the pre-queue (every ticket taken so
// far, numbered 1..N) is put in DrawOrder(seed, 1..N), everyone joining
// later is served after them in arrival order, and the seed is revealed
// (Draw). seed must match the commitment given to Setup (ErrSeedMismatch).
//
// The opening takes three steps, each safe to repeat, so an instance dying
// halfway leaves a room that the next Open call (from any instance)
// finishes: close the pre-queue; write the draw (recomputed from the seed,
// the same every time); mark the room open. Nobody is admitted before the
// last step.
func (r *Room) Open(ctx context.Context, seed Seed) error {
	v, err := freezeScript.Run(ctx, r.rdb, []string{r.k.meta}, seed.Commitment()).Slice()
	if err != nil {
		return unavailable(err)
	}
	switch v[0] {
	case "noroom":
		return ErrNoRoom
	case "badseed":
		return ErrSeedMismatch
	case "open":
		return nil
	}
	n := v[1].(int64)
	pre := make([]int64, n)
	for i := range pre {
		pre[i] = int64(i + 1)
	}
	order, err := DrawOrder(seed, pre)
	if err != nil {
		return err
	}
	if n > 1<<32-1 {
		return fmt.Errorf("%w: %d tickets in the pre-queue", ErrInvalid, n)
	}
	// draw: serve number -> ticket; rank: ticket -> serve number.
	draw, rank := make([]byte, 4*n), make([]byte, 4*n)
	for i, t := range order {
		binary.BigEndian.PutUint32(draw[4*i:], uint32(t))
		binary.BigEndian.PutUint32(rank[4*(t-1):], uint32(i+1))
	}
	if err := r.rdb.Set(ctx, r.k.draw, draw, 0).Err(); err != nil {
		return unavailable(err)
	}
	if err := r.rdb.Set(ctx, r.k.rank, rank, 0).Err(); err != nil {
		return unavailable(err)
	}
	res, err := openScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.rank, r.k.draw}, seed.String()).Text()
	if err != nil {
		return unavailable(err)
	}
	if res != "open" {
		return unavailable(fmt.Errorf("open: %s", res))
	}
	return nil
}

// Draw is the room's public draw: the commitment, the seed once open, the
// pre-queue, and the pre-queue tickets admitted so far in their order.
// Anyone can check it with VerifyDraw or the seckill-draw command.
func (r *Room) Draw(ctx context.Context) (PublicDraw, error) {
	m, err := r.rdb.HMGet(ctx, r.k.meta, "phase", "commitment", "seed", "seq", "pre", "head").Result()
	if err != nil {
		return PublicDraw{}, unavailable(err)
	}
	if m[0] == nil {
		return PublicDraw{}, ErrNoRoom
	}
	d := PublicDraw{ItemID: r.itemID, Commitment: m[1].(string), Served: []int64{}}
	num := func(x any) int64 {
		s, _ := x.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	n := num(m[4])
	if m[0] == "pre" {
		n = num(m[3])
	}
	d.PreQueue = make([]int64, n)
	for i := range d.PreQueue {
		d.PreQueue[i] = int64(i + 1)
	}
	if m[0] != "open" {
		return d, nil
	}
	d.Seed = m[2].(string)
	if served := min(num(m[5]), n); served > 0 {
		b, err := r.rdb.GetRange(ctx, r.k.draw, 0, 4*served-1).Bytes()
		if err != nil {
			return PublicDraw{}, unavailable(err)
		}
		if int64(len(b)) != 4*served {
			return PublicDraw{}, unavailable(fmt.Errorf("draw string is %d bytes, want %d", len(b), 4*served))
		}
		for i := range served {
			d.Served = append(d.Served, int64(binary.BigEndian.Uint32(b[4*i:])))
		}
	}
	return d, nil
}
