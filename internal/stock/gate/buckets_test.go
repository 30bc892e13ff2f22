package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// Known slots, from the Redis documentation and client libraries' tests.
func TestSlotKnownVectors(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":                        12739,
		"somekey":                          11058,
		"foo{hash_tag}":                    2515,
		"bar{hash_tag}":                    2515,
		"{user1}.following":                8106,
		"8xjx7vWrfPq54mKfFD3Y1CcjjofpnAcQ": 5458,
		"my_key":                           13711,
		"{user1234}:contact":               14020,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q): got %d, want %d", key, got, want)
		}
	}
}

// The slot of every key the buckets use, and of random keys with and
// without (empty, unclosed, several) hash tags, is what a Redis with
// cluster support says (CLUSTER KEYSLOT, on a private redis-server).
func TestSlotMatchesRedis(t *testing.T) {
	url := testenv.PrivateRedis(t, "--cluster-enabled", "yes")
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	keys := []string{"", "{}", "{}x", "x{}y{z}", "{a}{b}", "{", "}", "a{b", "{item:1}:meta"}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab{}:0123456789"
	for i := 0; i < 500; i++ {
		b := make([]byte, 1+r.IntN(12))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	k, _ := NewKeys("slot-test")
	for _, buckets := range []int{2, 3, 8, 64} {
		for _, bk := range AllBuckets(7, buckets) {
			keys = append(keys, k.Bucket(bk).Meta, k.Bucket(bk).Out)
		}
	}
	for _, key := range keys {
		want, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if got := Slot(key); int64(got) != want {
			t.Errorf("Slot(%q): got %d, Redis says %d", key, got, want)
		}
	}
}

// K buckets land in K different ranges of 16384/K slots (on a cluster of K
// masters with the default slot assignment, K different masters), bucket 0
// keeps the item's tag of old, and the tags depend on (item, b, K) only.
func TestBucketTagsSpreadOverRanges(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5, 8, 64} {
		for id := int64(1); id <= 50; id++ {
			seen := map[int]int{}
			for _, bk := range AllBuckets(id, k) {
				tag := bk.Tag()
				if bk.B == 0 && tag != fmt.Sprintf("item:%d", id) {
					t.Fatalf("item %d bucket 0 of %d: tag %q, want item:%d", id, k, tag, id)
				}
				r := Slot(tag) * k / SlotCount
				if prev, dup := seen[r]; dup {
					t.Fatalf("item %d, %d buckets: buckets %d and %d both in slot range %d", id, k, prev, bk.B, r)
				}
				seen[r] = bk.B
				tags.Delete(bk)
				if again := bk.Tag(); again != tag {
					t.Fatalf("item %d bucket %d of %d: tag %q, then %q", id, bk.B, k, tag, again)
				}
			}
		}
	}
	// On 3 masters as redis-cli --cluster create assigns slots.
	masters := func(slot int) int {
		switch {
		case slot <= 5460:
			return 0
		case slot <= 10922:
			return 1
		}
		return 2
	}
	for id := int64(1); id <= 200; id++ {
		seen := map[int]bool{}
		for _, bk := range AllBuckets(id, 3) {
			seen[masters(Slot(bk.Tag()))] = true
		}
		if len(seen) != 3 {
			t.Errorf("item %d, 3 buckets: on %d of 3 masters", id, len(seen))
		}
	}
}

func TestHomeBucketIsStableAndSpread(t *testing.T) {
	const k = 8
	count := make([]int, k)
	for i := 0; i < 8000; i++ {
		u := fmt.Sprintf("user-%d", i)
		b := HomeBucket(3, k, u)
		if b != HomeBucket(3, k, u) || b.K != k || b.Item != 3 {
			t.Fatalf("HomeBucket(%q) not stable: %+v", u, b)
		}
		count[b.B]++
	}
	for b, n := range count {
		if n < 800 || n > 1200 {
			t.Errorf("bucket %d: %d of 8000 users, want about 1000", b, n)
		}
	}
	if b := HomeBucket(3, 1, "anyone"); b != Single(3) {
		t.Errorf("one bucket: got %+v, want %+v", b, Single(3))
	}
}
