package gate

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// A move whose first step ran before a rebuild and whose second step comes
// after it (its mover stalled meanwhile, holding the record the rebuild
// dropped) adds nothing: the rebuild counted, from the database, the
// units the first step took. Before moves carried their gate's build, the
// late step added them again, and the gate had units the database did not.
func TestMoveAcrossRebuildAddsNothing(t *testing.T) {
	ctx := context.Background()
	b := testenv.Embedded(t)
	rdb := b.Redis(t)
	keys, err := NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	g := New(rdb, keys, nil, nil)
	const units, k = 30, 3
	it := &stock.Item{ID: 7, Stock: units, Buckets: k}
	if _, err := g.Rebuild(ctx, Rebuild{Item: it}); err != nil {
		t.Fatal(err)
	}
	from, to := Bucket{Item: it.ID, B: 0, K: k}, Bucket{Item: it.ID, B: 1, K: k}
	fk := keys.Bucket(from)
	res, err := moveOutScript.Run(ctx, rdb, []string{fk.Meta, fk.Out}, "m1", to.B, time.Now().UnixMilli()).StringSlice()
	if err != nil || len(res) != 2 || res[0] != "ok" {
		t.Fatalf("move out: got %q, %v", res, err)
	}
	if _, err := g.Rebuild(ctx, Rebuild{Item: it}); err != nil {
		t.Fatal(err)
	}
	if err := g.finishMove(ctx, from, "m1 "+res[1]); err != nil {
		t.Fatalf("late second step: %v", err)
	}
	v, err := g.ReadBuckets(ctx, it.ID, k, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stock != units || v.Free != units {
		t.Errorf("after a move's late second step: stock %d, free %d; want %d and %d (as the database has it)", v.Stock, v.Free, units, units)
	}
}
