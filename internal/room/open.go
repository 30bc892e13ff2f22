package room

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
)

// Open opens the room with the draw: the pre-queue (every ticket taken so
// far, numbered 1..N) is closed, its transcript T taken (the SHA-256 of
// its tickets' leaves, TicketLeaf of each one's Options.TicketString), it
// is put in DrawOrder(seed, T, 1..N), everyone joining later is served
// after them in arrival order, and the seed and T are revealed (Draw).
// seed must match the commitment given to Setup (ErrSeedMismatch).
//
// The opening takes three steps, each safe to repeat, so an instance dying
// halfway leaves a room that the next Open call (from any instance)
// finishes: close the pre-queue; write the leaves and the draw (recomputed
// from the closed pre-queue and the seed, the same every time); mark the
// room open. Nobody is admitted before the last step.
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
	if n > 1<<32-1 {
		return fmt.Errorf("%w: %d tickets in the pre-queue", ErrInvalid, n)
	}
	epoch, _ := v[2].(string)
	leaves, err := r.leaves(ctx, n, epoch)
	if err != nil {
		return err
	}
	transcript := TranscriptOf(leaves)
	pre := make([]int64, n)
	for i := range pre {
		pre[i] = int64(i + 1)
	}
	order, err := DrawOrder(seed, transcript, pre)
	if err != nil {
		return err
	}
	// draw: serve number -> ticket; rank: ticket -> serve number.
	draw, rank := make([]byte, 4*n), make([]byte, 4*n)
	for i, t := range order {
		binary.BigEndian.PutUint32(draw[4*i:], uint32(t))
		binary.BigEndian.PutUint32(rank[4*(t-1):], uint32(i+1))
	}
	flat := make([]byte, 0, sha256.Size*n)
	for i := range leaves {
		flat = append(flat, leaves[i][:]...)
	}
	for key, val := range map[string][]byte{r.k.leaves: flat, r.k.draw: draw, r.k.rank: rank} {
		if err := r.rdb.Set(ctx, key, val, 0).Err(); err != nil {
			return unavailable(err)
		}
	}
	res, err := openScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.rank, r.k.draw, r.k.leaves}, seed.String(), transcript.String()).Text()
	if err != nil {
		return unavailable(err)
	}
	if res != "open" {
		return unavailable(fmt.Errorf("open: %s", res))
	}
	return nil
}

// leavesBatch is how many tickets' owners one HMGET of the opening reads.
const leavesBatch = 1000

// leaves is the leaf of each of the closed pre-queue's n tickets, in
// ticket order: TicketLeaf of its ticket string, from its owner (the
// room's tickets hash) and the set-up's epoch.
func (r *Room) leaves(ctx context.Context, n int64, epoch string) ([][sha256.Size]byte, error) {
	out := make([][sha256.Size]byte, 0, n)
	fields := make([]string, 0, leavesBatch)
	for from := int64(1); from <= n; from += leavesBatch {
		fields = fields[:0]
		for t := from; t <= n && t < from+leavesBatch; t++ {
			fields = append(fields, strconv.FormatInt(t, 10))
		}
		users, err := r.rdb.HMGet(ctx, r.k.tickets, fields...).Result()
		if err != nil {
			return nil, unavailable(err)
		}
		for i, u := range users {
			user, ok := u.(string)
			if !ok {
				return nil, unavailable(fmt.Errorf("pre-queue ticket %d has no owner", from+int64(i)))
			}
			out = append(out, TicketLeaf(r.opt.TicketString(from+int64(i), user, epoch)))
		}
	}
	return out, nil
}

// Draw is the room's public draw: the commitment, the seed once open, the
// pre-queue, its leaves and transcript once open, and the pre-queue
// tickets admitted so far in their order.
// Anyone can check it with VerifyDraw or the seckill-draw command.
func (r *Room) Draw(ctx context.Context) (PublicDraw, error) {
	m, err := r.rdb.HMGet(ctx, r.k.meta, "phase", "commitment", "seed", "seq", "pre", "head", "transcript").Result()
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
	if d.Transcript, _ = m[6].(string); d.Transcript != "" {
		b, err := r.rdb.GetRange(ctx, r.k.leaves, 0, -1).Bytes()
		if err != nil {
			return PublicDraw{}, unavailable(err)
		}
		if int64(len(b)) != sha256.Size*n {
			return PublicDraw{}, unavailable(fmt.Errorf("leaves string is %d bytes, want %d", len(b), sha256.Size*n))
		}
		d.Leaves = make([]string, n)
		for i := range d.Leaves {
			d.Leaves[i] = hex.EncodeToString(b[sha256.Size*i : sha256.Size*(i+1)])
		}
	}
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
