package gate

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// oddStrings are the user-chosen parts of keys (idempotency keys, order
// ids): braces included, which could move a key's hash tag if the item's
// tag did not come first.
var oddStrings = []string{"", "k", "{", "}", "{}", "}{", "{x}", "a{b}c", "{item:1}", "{{item:2}}", "x}y{z", "ключ", "a b", strings.Repeat("z", 300)}

// itemKeys is every key Keys builds for item id: each method whose first
// parameter is an item id (found by reflection, so a method added later is
// checked without being listed here), called with every odd string for
// its string parameters; plus the unexported ones and the temporary
// rebuild hash. names[i] says which method made keys[i].
func itemKeys(t *testing.T, k Keys, id int64) (keys, names []string) {
	t.Helper()
	v := reflect.ValueOf(k)
	typ := v.Type()
	int64T, stringT := reflect.TypeOf(int64(0)), reflect.TypeOf("")
	methods := 0
	for i := 0; i < typ.NumMethod(); i++ {
		m := typ.Method(i)
		ft := m.Type // receiver first
		if ft.NumIn() < 2 || ft.In(1) != int64T || ft.NumOut() != 1 || ft.Out(0) != stringT {
			continue
		}
		methods++
		rest := ft.NumIn() - 2
		for j := 0; j < rest; j++ {
			if ft.In(2+j) != stringT {
				t.Fatalf("Keys.%s takes a %s: teach this test to call it", m.Name, ft.In(2+j))
			}
		}
		call := func(strs ...string) {
			args := []reflect.Value{reflect.ValueOf(id)}
			for _, s := range strs {
				args = append(args, reflect.ValueOf(s))
			}
			keys = append(keys, v.Method(i).Call(args)[0].String())
			names = append(names, m.Name)
		}
		switch rest {
		case 0:
			call()
		case 1:
			for _, s := range oddStrings {
				call(s)
			}
		default:
			t.Fatalf("Keys.%s takes %d strings: teach this test to call it", m.Name, rest)
		}
	}
	// Item, Meta, Buyers, Lock, Idem, Stream, Dead, Released at least.
	if methods < 8 {
		t.Fatalf("found %d Keys methods taking an item id, want at least 8: is the reflection broken?", methods)
	}
	keys = append(keys, k.Item(id)+":rebuild:"+randomHex(6))
	names = append(names, "rebuild")
	for _, s := range oddStrings {
		keys = append(keys, k.void(id, s))
		names = append(names, "void")
	}
	return keys, names
}

var slotTestIDs = []int64{0, 1, 7, 42, 1 << 40, math.MaxInt64, -1, math.MinInt64}

// "CROSSSLOT impossible, not merely unseen": every key of an item, whatever
// its id, the prefix and the strings a client chose, hashes to the item's
// slot, so no script or transaction on one item can span slots on a Redis
// Cluster. The slots are computed (Slot, and testenv.KeySlot that the
// tests' SlotCheck uses), and checked against the real cluster's CLUSTER
// KEYSLOT below.
func TestEveryItemKeyHashesToTheItemSlot(t *testing.T) {
	for _, prefix := range []string{"", "seckill", "t-1", "a:b:c", "ключ"} {
		k, err := NewKeys(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range slotTestIDs {
			want := Slot(k.Item(id))
			keys, names := itemKeys(t, k, id)
			for i, key := range keys {
				if got := Slot(key); got != want {
					t.Errorf("prefix %q item %d: Keys.%s gives %q in slot %d, want the item's slot %d", prefix, id, names[i], key, got, want)
				}
				if got := testenv.KeySlot(key); got != Slot(key) {
					t.Errorf("key %q: testenv.KeySlot says %d, Slot %d", key, got, Slot(key))
				}
			}
		}
	}
}

// The computed slots are Redis's: CLUSTER KEYSLOT on the real cluster
// agrees for every key of TestEveryItemKeyHashesToTheItemSlot and for
// tricky hash tags.
func TestKeySlotIsClusterKeyslot(t *testing.T) {
	rdb := testenv.Cluster(t).Universal(t)
	ctx := context.Background()
	k, _ := NewKeys("seckill")
	var keys []string
	for _, id := range slotTestIDs {
		ks, _ := itemKeys(t, k, id)
		keys = append(keys, ks...)
	}
	keys = append(keys, oddStrings...)
	keys = append(keys, "{}{a}", "a{}b{c}", "{a}{b}", "foo{bar}{zap}", "{user1000}.following")
	for _, key := range keys {
		got, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if int(got) != Slot(key) || int(got) != testenv.KeySlot(key) {
			t.Errorf("key %q: CLUSTER KEYSLOT says %d, Slot %d, testenv.KeySlot %d", key, got, Slot(key), testenv.KeySlot(key))
		}
	}
}

// A bucket's keys, likewise, all hash to the bucket's slot: every string
// field of BucketKeys (found by reflection), its Idempotency-Key claims and
// void marks with odd strings. Bucket 0's are the item's own keys.
func TestEveryBucketKeyHashesToTheBucketSlot(t *testing.T) {
	k, _ := NewKeys("seckill")
	for _, id := range slotTestIDs {
		for _, n := range []int{1, 3, stock.MaxBuckets} {
			for _, bk := range AllBuckets(id, n) {
				bks := k.Bucket(bk)
				want := Slot(bks.Meta)
				if bk.B == 0 && want != Slot(k.Item(id)) {
					t.Errorf("item %d: bucket 0's slot %d, want the item's %d", id, want, Slot(k.Item(id)))
				}
				v := reflect.ValueOf(bks)
				var keys []string
				for i := 0; i < v.NumField(); i++ {
					if f := v.Field(i); f.Kind() == reflect.String {
						keys = append(keys, f.String())
					}
				}
				if len(keys) < 6 {
					t.Fatalf("BucketKeys: %d string fields, want at least 6: is the reflection broken?", len(keys))
				}
				for _, s := range oddStrings {
					keys = append(keys, bks.Idem(s), bks.void(s))
				}
				for _, key := range keys {
					if got := Slot(key); got != want {
						t.Errorf("item %d bucket %d/%d: key %q in slot %d, want the bucket's slot %d", id, bk.B, n, key, got, want)
					}
				}
			}
		}
	}
}
