package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// fuzzState is what a refused request must leave as it was: the database's
// row counts, orders per status, every item's stock and sold, and every
// Redis key of the service with its value, the rate limiter's included
// (redis_rate puts "rate:" before the service's prefix).
type fuzzState struct {
	DB    string
	Redis map[string]any
}

type fuzzEnv struct {
	b   testenv.Backend
	c   *apptest.Client
	db  *gorm.DB
	rdb *redis.Client
	it  apptest.Item
	// soldOut is a second item, of stock 1, sold to fuzz-first.
	soldOut apptest.Item
}

// newFuzzEnvs starts the service once per fuzz target on every backend
// (embedded, and MariaDB with the real Redis when they answer; under CI=true
// they must), each with one item on sale and one order placed. The seed
// corpus runs on all of them in a plain go test, and so does each input
// when fuzzing.
func newFuzzEnvs(f *testing.F) []*fuzzEnv {
	var envs []*fuzzEnv
	for _, b := range testenv.All(f) {
		_, c := apptest.Start(f, b)
		e := &fuzzEnv{b: b, c: c, db: b.DB(f), rdb: b.Redis(f)}
		e.it = c.CreateItem(f, 1000000, "lua")
		if r, err := c.PlaceOrder(e.it.ID, "fuzz-first", "fuzz-key"); err != nil || r.Status != http.StatusCreated {
			f.Fatalf("%s: seed order: got %d %s %v", b.Name, r.Status, r.Body, err)
		}
		e.soldOut = c.CreateItem(f, 1, "lua")
		if r, err := c.PlaceOrder(e.soldOut.ID, "fuzz-first", ""); err != nil || r.Status != http.StatusCreated {
			f.Fatalf("%s: seed order of the sold-out item: got %d %s %v", b.Name, r.Status, r.Body, err)
		}
		if len(envs) > 0 && e.it.ID != envs[0].it.ID {
			f.Fatalf("%s: item %d, %s item %d: the targets send one id to every backend", b.Name, e.it.ID, envs[0].b.Name, envs[0].it.ID)
		}
		envs = append(envs, e)
	}
	return envs
}

func (e *fuzzEnv) snapshot(t *testing.T) fuzzState {
	t.Helper()
	var db strings.Builder
	for _, q := range []string{
		"SELECT 'items', COUNT(*) FROM items",
		"SELECT 'order_failures', COUNT(*) FROM order_failures",
		"SELECT status, COUNT(*) FROM orders GROUP BY status ORDER BY status",
		"SELECT id, CONCAT(stock, ':', sold) FROM items ORDER BY id",
	} {
		if e.b.MySQLDSN == "" {
			q = strings.Replace(q, "CONCAT(stock, ':', sold)", "stock || ':' || sold", 1)
		}
		rows, err := e.db.Raw(q).Rows()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&db, "%s=%s ", k, v)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := fuzzState{DB: db.String(), Redis: map[string]any{}}
	ctx := context.Background()
	for _, pattern := range []string{e.b.KeyPrefix + ":*", "rate:" + e.b.KeyPrefix + ":*"} {
		keys, err := e.rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			s.Redis[k] = redisValue(t, e.rdb, k)
		}
	}
	return s
}

// check sends one request and checks the properties: an answer, never a
// 5xx, and a refusal (any 4xx, 409 and 422 included) changes nothing.
//
// "Nothing" is exact for the database (no row, status, stock or sold
// changes) and for every Redis key, with these effects of having tried,
// none of which sells or reserves anything, allowed on an order attempt
// that was read as valid and refused by the business rules (404 item
// unknown, 409, 422):
//   - the rate-limit key of the attempt's user may change: an attempt
//     counts against its user's budget whatever its answer, or a bot could
//     hammer refusals for free (a 400, 401, 413 or 429 is refused before
//     the limiter and must not touch it);
//   - on a 409 or 422 with an Idempotency-Key, that key's claim may appear,
//     bound to the user with no order ("<user>|"), so a replay gets the
//     same refusal and another user the key's 422;
//   - on a 409 sold_out, the item's gate may record the sell-out (the
//     "soldout" field of its meta hash, and nothing else in it).
//
// A rate-limit key may also vanish under any answer: it expires about a
// second after its user's last attempt. Admin refusals (FuzzAdmin) get no
// other allowance.
func (e *fuzzEnv) check(t *testing.T, method, path string, body []byte, admin bool, header map[string]string) {
	t.Helper()
	before := e.snapshot(t)
	r, err := e.c.Do(method, path, body, admin, header)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", e.b.Name, method, path, err)
	}
	if r.Status >= 500 {
		t.Fatalf("%s: %s %s %q %v: got %d %s, want no 5xx", e.b.Name, method, path, body, header, r.Status, r.Body)
	}
	if r.Status < 400 {
		return
	}
	after := e.snapshot(t)
	var allowed func(key string, before, after any) bool
	if !admin && method == http.MethodPost && (r.Status == http.StatusNotFound || r.Status == http.StatusConflict ||
		r.Status == http.StatusUnprocessableEntity) && r.ErrorCode() != "invalid_request" {
		allowed = e.triedOrder(body, header["Idempotency-Key"], r)
	}
	var changed []string
	if before.DB != after.DB {
		changed = append(changed, fmt.Sprintf("database: %s -> %s", before.DB, after.DB))
	}
	for k := range union(before.Redis, after.Redis) {
		b, a := before.Redis[k], after.Redis[k]
		if a == nil && strings.HasPrefix(k, "rate:") {
			continue // expired: a rate-limit key lives about a second after its last use
		}
		if !reflect.DeepEqual(b, a) && (allowed == nil || !allowed(k, b, a)) {
			changed = append(changed, fmt.Sprintf("%s: %v -> %v", k, b, a))
		}
	}
	if len(changed) > 0 {
		sort.Strings(changed)
		t.Fatalf("%s: %s %s %q %v: got %d %s and state changed:\n  %s",
			e.b.Name, method, path, body, header, r.Status, r.Body, strings.Join(changed, "\n  "))
	}
}

// triedOrder is what an order attempt refused by the business rules may
// change (see check).
func (e *fuzzEnv) triedOrder(body []byte, key string, r apptest.Response) func(k string, before, after any) bool {
	var req struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(body, &req) // read as valid by the service, or it would be a 400
	rateKey := "rate:" + e.b.KeyPrefix + ":ratelimit:user:" + req.UserID
	claimSuffix := ":idem:" + key
	return func(k string, before, after any) bool {
		switch {
		case k == rateKey:
			return true
		case key != "" && r.Status != http.StatusNotFound && strings.HasPrefix(k, e.b.KeyPrefix+":{item:") && strings.HasSuffix(k, claimSuffix):
			return before == nil && after == "string "+req.UserID+"|"
		case r.ErrorCode() == "sold_out" && strings.HasSuffix(k, "}:meta"):
			b, _ := before.(map[string]string)
			a, _ := after.(map[string]string)
			if b == nil || a == nil {
				return false
			}
			b, a = maps.Clone(b), maps.Clone(a)
			delete(b, "soldout")
			delete(a, "soldout")
			return maps.Equal(a, b)
		}
		return false
	}
}

func union(a, b map[string]any) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// redisValue renders a key's type and value (miniredis has no DUMP for
// every type): a hash as its map, so fields can be compared, anything else
// as a string.
func redisValue(t *testing.T, rdb *redis.Client, k string) any {
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
		var h map[string]string
		if h, err = rdb.HGetAll(ctx, k).Result(); err == nil {
			return h
		}
	case "set":
		var m []string
		m, err = rdb.SMembers(ctx, k).Result()
		sort.Strings(m)
		v = m
	case "zset":
		v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
	case "list":
		v, err = rdb.LRange(ctx, k, 0, -1).Result()
	case "stream":
		v, err = rdb.XRange(ctx, k, "-", "+").Result()
	case "none":
		return nil
	}
	if errors.Is(err, redis.Nil) {
		return nil // expired between TYPE and the read
	}
	if err != nil {
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
	envs := newFuzzEnvs(f)
	id := fmt.Sprint(envs[0].it.ID) // the same on every backend: each has one item
	f.Add(id, []byte(`{"user_id":"alice"}`), "", "")
	// Mixed case: other users and keys than the seed's, on every backend.
	f.Add(id, []byte(`{"user_id":"Fuzz-First"}`), "FUZZ-KEY", "")
	f.Add(id, []byte(`{"user_id":"FUZZ-FIRST"}`), "", "")
	f.Add(id, []byte(`{"user_id":"ALICE"}`), "fuzz-key", "")
	f.Add(id, []byte(`{"USER_ID":"carol"}`), "", "")
	f.Add(id, []byte(`{"user_id":"carol","user_id":"dave"}`), "", "")
	f.Add("+"+id, []byte(`{"user_id":"carol"}`), "", "")
	f.Add(id, []byte(`{"user_id":"fuzz-first"}`), "fuzz-key", "req-1")
	f.Add(id, []byte(`{"user_id":"bob"}`), "fuzz-key", "")
	f.Add(id, []byte(`{"user_id":"fuzz-first"}`), "other-key", "")
	soldOut := fmt.Sprint(envs[0].soldOut.ID)
	f.Add(soldOut, []byte(`{"user_id":"bob"}`), "", "")
	f.Add(soldOut, []byte(`{"user_id":"carol"}`), "carol-key", "")
	f.Add(soldOut, []byte(`{"user_id":"fuzz-first"}`), "", "")
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
		for k, v := range h {
			if !validHeaderValue(v) {
				delete(h, k) // the HTTP client refuses to send these
			}
		}
		for _, e := range envs {
			e.check(t, http.MethodPost, "/api/v1/items/"+url.PathEscape(itemID)+"/orders", body, false, h)
		}
	})
}

func FuzzAdmin(f *testing.F) {
	envs := newFuzzEnvs(f)
	id := fmt.Sprint(envs[0].it.ID)
	f.Add(uint8(0), id, []byte(`{"name":"x","stock":5}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"x","stock":-1,"strategy":"lock"}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"x","stock":5,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":2000000}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":0}`), true)
	f.Add(uint8(1), "x1", []byte(`{"stock":3}`), true)
	f.Add(uint8(1), id, []byte(`{"stock":3}`), false)
	f.Add(uint8(2), id, []byte(nil), true)
	f.Add(uint8(2), "-1", []byte(nil), false)
	f.Add(uint8(1), id, []byte(`{"stock":7,"stock":8}`), true)
	f.Add(uint8(1), id, []byte(`{"STOCK":7}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"x","Stock":5}`), true)
	f.Add(uint8(0), "", []byte(`{"name":" \u200b ","stock":5}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"a\u0000b","stock":5}`), true)
	f.Add(uint8(0), "", []byte(`{"name":"a\u0085b","stock":5}`), true)
	// Ops 3 and 4 take arg as the raw query of the list and of a reconcile.
	f.Add(uint8(3), "limit=1&limit=200000", []byte(nil), true)
	f.Add(uint8(3), "limit=05&before=01", []byte(nil), true)
	f.Add(uint8(3), "status=ended&status=on_sale", []byte(nil), true)
	f.Add(uint8(4), "dry_run=true&dry_run=false", []byte(nil), true)
	f.Add(uint8(4), "dry_run=", []byte(nil), true)
	f.Add(uint8(4), "dry_run=true;x=1", []byte(nil), true)

	f.Fuzz(func(t *testing.T, op uint8, arg string, body []byte, withToken bool) {
		for _, e := range envs {
			switch op % 5 {
			case 0:
				e.check(t, http.MethodPost, "/api/v1/admin/items", body, withToken, nil)
			case 1:
				e.check(t, http.MethodPut, "/api/v1/admin/items/"+url.PathEscape(arg)+"/stock", body, withToken, nil)
			case 2:
				e.check(t, http.MethodGet, "/api/v1/admin/items/"+url.PathEscape(arg), nil, withToken, nil)
			case 3, 4:
				path := "/api/v1/admin/items?" + arg
				method := http.MethodGet
				if op%5 == 4 {
					path, method = fmt.Sprintf("/api/v1/admin/items/%d/reconcile?%s", e.it.ID, arg), http.MethodPost
				}
				if _, err := url.ParseRequestURI(path); err != nil || strings.ContainsAny(arg, " #") {
					return // the HTTP client refuses to send it, or sends another query
				}
				e.check(t, method, path, nil, withToken, nil)
			}
		}
	})
}
