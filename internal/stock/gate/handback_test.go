package gate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// TestHandBackAndReleaseReturnAUnitOnce: a write that committed although
// its caller heard an error (a commit held in a stalled connection) gets
// its reservation handed back, and its order, cancelled, gets its unit
// released: whichever comes first, however often each runs, the unit
// comes back once. On an item with several buckets the buyer's reservation
// lives in her home bucket and the order id picks the release's bucket;
// the user and order here are chosen so that the two differ.
func TestHandBackAndReleaseReturnAUnitOnce(t *testing.T) {
	type step func(ctx context.Context, g *Gate, home Bucket, user, order string) error
	handBack := func(ctx context.Context, g *Gate, home Bucket, user, order string) error {
		_, err := g.HandBack(ctx, home, user, order, "")
		return err
	}
	release := func(ctx context.Context, g *Gate, home Bucket, _, order string) error {
		_, err := g.Release(ctx, home.Item, home.K, order)
		return err
	}
	orders := []struct {
		name  string
		steps []step
	}{
		{"release, hand-back", []step{release, handBack}},
		{"release, hand-back twice", []step{release, handBack, handBack}},
		{"hand-back, release", []step{handBack, release}},
		{"hand-back, release, hand-back, release", []step{handBack, release, handBack, release}},
	}
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		keys, err := NewKeys(b.KeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		pipe := NewPipeline(rdb, nil)
		t.Cleanup(pipe.Close)
		g := New(rdb, keys, pipe, nil)
		const units = 4
		id := int64(0)
		for _, k := range []int{1, 3} {
			for _, o := range orders {
				t.Run(fmt.Sprintf("buckets=%d/%s", k, o.name), func(t *testing.T) {
					id++
					it := &stock.Item{ID: id, Stock: units, Buckets: k}
					if _, err := g.Rebuild(ctx, Rebuild{Item: it}); err != nil {
						t.Fatal(err)
					}
					user, order := "u0", "o0"
					for i := 1; k > 1 && HomeBucket(id, k, user) == ReleaseBucket(id, k, order); i++ {
						order = fmt.Sprintf("o%d", i)
					}
					home := HomeBucket(id, k, user)
					if _, err := g.Reserve(ctx, home, user, order, time.Now(), nil); err != nil {
						t.Fatal(err)
					}
					for _, s := range o.steps {
						if err := s(ctx, g, home, user, order); err != nil {
							t.Fatal(err)
						}
					}
					v, err := g.ReadBuckets(ctx, id, k, false)
					if err != nil {
						t.Fatal(err)
					}
					if v.Free != units || v.Taken != 0 {
						t.Errorf("after the steps: %d free, %d taken; want %d free, 0 taken (the unit back once)", v.Free, v.Taken, units)
					}
				})
			}
		}
	})
}

// TestHandBackCutShortIsFinishedByTheNext: on an item with several buckets
// a hand-back whose unit goes to another bucket takes three steps; one cut
// short after any of them (its process died) leaves the buyer entry, and
// the next hand-back of the attempt (a retry, the orphan hand-back, a
// reconcile) finishes it: the unit comes back once and the entry goes.
func TestHandBackCutShortIsFinishedByTheNext(t *testing.T) {
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		keys, err := NewKeys(b.KeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		pipe := NewPipeline(rdb, nil)
		t.Cleanup(pipe.Close)
		g := New(rdb, keys, pipe, nil)
		const units, k = 4, 3
		for cut := 1; cut <= 2; cut++ { // after the check in the home bucket; after the release too
			t.Run(fmt.Sprintf("after step %d", cut), func(t *testing.T) {
				id := int64(cut)
				if _, err := g.Rebuild(ctx, Rebuild{Item: &stock.Item{ID: id, Stock: units, Buckets: k}}); err != nil {
					t.Fatal(err)
				}
				user, order := "u0", "o0"
				for i := 1; HomeBucket(id, k, user) == ReleaseBucket(id, k, order); i++ {
					order = fmt.Sprintf("o%d", i)
				}
				home, rel := keys.Bucket(HomeBucket(id, k, user)), keys.Bucket(ReleaseBucket(id, k, order))
				if _, err := g.Reserve(ctx, HomeBucket(id, k, user), user, order, time.Now(), nil); err != nil {
					t.Fatal(err)
				}
				status, err := runStatus(ctx, rdb, handBackHomeScript, "", []string{home.Meta, home.Buyers, home.void(order)}, user, order, "", 60)
				if err != nil || status != "owned" {
					t.Fatalf("first step: got %q, %v; want owned", status, err)
				}
				if cut == 2 {
					if _, err := runStatus(ctx, rdb, releaseScript, "", []string{rel.Meta, rel.Released}, order); err != nil {
						t.Fatal(err)
					}
				}
				if held, err := rdb.HGet(ctx, home.Buyers, user).Result(); err != nil || held != order {
					t.Fatalf("after the cut: buyer entry %q, %v; want %q kept", held, err, order)
				}
				back, err := g.HandBack(ctx, HomeBucket(id, k, user), user, order, "")
				if err != nil {
					t.Fatal(err)
				}
				if want := cut == 1; back != want {
					t.Errorf("the next hand-back: got back=%v, want %v", back, want)
				}
				if n, err := rdb.HExists(ctx, home.Buyers, user).Result(); err != nil || n {
					t.Errorf("after the next hand-back: buyer entry there=%v (%v), want gone", n, err)
				}
				v, err := g.ReadBuckets(ctx, id, k, false)
				if err != nil {
					t.Fatal(err)
				}
				if v.Free != units || v.Taken != 0 {
					t.Errorf("%d free, %d taken; want %d free, 0 taken", v.Free, v.Taken, units)
				}
			})
		}
	})
}
