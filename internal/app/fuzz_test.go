package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// fuzzState is what a refused request must leave as it was: row counts,
// every item's stock and sold, and every Redis key of the service with its
// value.
type fuzzState struct {
	Items, Orders int64
	StockSold     string
	Redis         map[string]string
}

type fuzzEnv struct {
	b   testenv.Backend
	c   *apptest.Client
	db  *gorm.DB
	rdb *redis.Client
	it  apptest.Item
}

// newFuzzEnv starts the service once per fuzz target, on the embedded
// backend, with one item on sale and one order placed.
func newFuzzEnv(f *testing.F) *fuzzEnv {
	b := testenv.Embedded(f)
	_, c := apptest.Start(f, b)
	e := &fuzzEnv{b: b, c: c, db: b.DB(f), rdb: b.Redis(f)}
	e.it = c.CreateItem(f, 1000000, "lua")
	if r, err := c.PlaceOrder(e.it.ID, "fuzz-first", "fuzz-key"); err != nil || r.Status != http.StatusCreated {
		f.Fatalf("seed order: got %d %s %v", r.Status, r.Body, err)
	}
	return e
}

func (e *fuzzEnv) snapshot(t *testing.T) fuzzState {
	t.Helper()
	var s fuzzState
	if err := e.db.Raw("SELECT COUNT(*) FROM items").Scan(&s.Items).Error; err != nil {
		t.Fatal(err)
	}
	if err := e.db.Raw("SELECT COUNT(*) FROM orders").Scan(&s.Orders).Error; err != nil {
		t.Fatal(err)
	}
	if err := e.db.Raw("SELECT COALESCE(GROUP_CONCAT(id || ':' || stock || ':' || sold), '') FROM items").Scan(&s.StockSold).Error; err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, e.b.KeyPrefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	s.Redis = map[string]string{}
	for _, k := range keys {
		s.Redis[k] = redisValue(t, e.rdb, k)
	}
	return s
}

// check sends one request and checks the properties: an answer, never a
// 5xx, and a refusal (other than a business 409, which may record an
// idempotency claim by design) changes nothing.
func (e *fuzzEnv) check(t *testing.T, method, path string, body []byte, admin bool, header map[string]string) {
	t.Helper()
	for k, v := range header {
		if strings.ContainsAny(v, "\r\n\x00") || !validHeaderValue(v) {
			delete(header, k) // the HTTP client refuses to send these
		}
	}
	before := e.snapshot(t)
	r, err := e.c.Do(method, path, body, admin, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.Status >= 500 {
		t.Fatalf("%s %s %q %v: got %d %s, want no 5xx", method, path, body, header, r.Status, r.Body)
	}
	if r.Status >= 400 && r.Status != http.StatusConflict {
		if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s %s %q %v: got %d %s and state changed:\n before %+v\n after  %+v",
				method, path, body, header, r.Status, r.Body, before, after)
		}
	}
}

// redisValue renders a key's type and value (miniredis has no DUMP for
// every type).
func redisValue(t *testing.T, rdb *redis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := rdb.Type(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "string":
		v, err = rdb.Get(ctx, k).Result()
	case "hash":
		v, err = rdb.HGetAll(ctx, k).Result()
	case "set":
		var m []string
		m, err = rdb.SMembers(ctx, k).Result()
		sort.Strings(m)
		v = m
	case "zset":
		v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
	case "list":
		v, err = rdb.LRange(ctx, k, 0, -1).Result()
	case "none":
		return "none"
	}
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v", typ, v)
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func FuzzOrder(f *testing.F) {
	e := newFuzzEnv(f)
	id := fmt.Sprint(e.it.ID)
	f.Add(id, []byte(`{"user_id":"alice"}`), "", "")
	f.Add(id, []byte(`{"user_id":"fuzz-first"}`), "fuzz-key", "req-1")
	f.Add(id, []byte(`{"user_id":"bob"}`), "fuzz-key", "")
	f.Add(id, []byte(`{"user_id":`), "", "")
	f.Add("0", []byte(`{"user_id":"carol"}`), "", "")
	f.Add("99999", []byte(`{"user_id":"carol"}`), "k", "")
	f.Add("abc", []byte(`{}`), "", strings.Repeat("x", 80))
	f.Add(id, []byte(`{"user_id":"a","qty":1}`), "a b", "")
	f.Fuzz(func(t *testing.T, itemID string, body []byte, idemKey, requestID string) {
		h := map[string]string{}
		if idemKey != "" {
			h["Idempotency-Key"] = idemKey
		}
		if requestID != "" {
			h["X-Request-Id"] = requestID
		}
		e.check(t, http.MethodPost, "/api/v1/items/"+url.PathEscape(itemID)+"/orders", body, false, h)
	})
}

func FuzzAdmin(f *testing.F) {
	e := newFuzzEnv(f)
	id := fmt.Sprint(e.it.ID)
	f.Add(uint8(0), id, []byte(`{"name":"x","stock":5}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"x","stock":-1,"strategy":"lock"}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"x","stock":5,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":2000000}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":0}`), true)
	f.Add(uint8(1), "x1", []byte(`{"stock":3}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":3}`), false)
	f.Add(uint8(2), id, []byte(nil), true)
	f.Add(uint8(2), "-1", []byte(nil), false)
	f.Fuzz(func(t *testing.T, op uint8, itemID string, body []byte, withToken bool) {
		switch op % 3 {
		case 0:
			e.check(t, http.MethodPost, "/api/v1/admin/items", body, withToken, nil)
		case 1:
			e.check(t, http.MethodPut, "/api/v1/admin/items/"+url.PathEscape(itemID)+"/stock", body, withToken, nil)
		case 2:
			e.check(t, http.MethodGet, "/api/v1/admin/items/"+url.PathEscape(itemID), nil, withToken, nil)
		}
	})
}
