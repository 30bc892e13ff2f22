package app_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// state is everything a bad request must leave as it was.
type state struct {
	Items, Orders int64
	Stock, Sold   int64
	Gate          map[string]string
	RedisKeys     int
}

func snapshot(t *testing.T, b testenv.Backend, c *apptest.Client, itemID int64) state {
	t.Helper()
	db := b.DB(t)
	var s state
	if err := db.Raw("SELECT COUNT(*) FROM items").Scan(&s.Items).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*) FROM orders").Scan(&s.Orders).Error; err != nil {
		t.Fatal(err)
	}
	it := c.AdminItem(t, itemID)
	s.Stock, s.Sold = it.Stock, it.Sold
	rdb := b.Redis(t)
	ctx := context.Background()
	gate, err := rdb.HGetAll(ctx, fmt.Sprintf("%s:{item:%d}:meta", b.KeyPrefix, itemID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	s.Gate = gate
	keys, err := rdb.Keys(ctx, b.KeyPrefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	s.RedisKeys = len(keys)
	return s
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		it := c.CreateItem(t, 5, "lua")
		if r, _ := c.PlaceOrder(it.ID, "first-buyer", ""); r.Status != 201 {
			t.Fatalf("seed order: got %d %s", r.Status, r.Body)
		}
		orders := fmt.Sprintf("/api/v1/items/%d/orders", it.ID)
		stock := fmt.Sprintf("/api/v1/admin/items/%d/stock", it.ID)
		cases := []struct {
			name, method, path string
			body               any
			admin              bool
			header             map[string]string
			status             int
			code               string
		}{
			{"malformed JSON", "POST", orders, `{"user_id":`, false, nil, 400, "invalid_request"},
			{"not an object", "POST", orders, `["alice"]`, false, nil, 400, "invalid_request"},
			{"two objects", "POST", orders, `{"user_id":"a"}{"user_id":"b"}`, false, nil, 400, "invalid_request"},
			{"empty body", "POST", orders, ``, false, nil, 400, "invalid_request"},
			{"missing user_id", "POST", orders, `{}`, false, nil, 400, "invalid_request"},
			{"empty user_id", "POST", orders, `{"user_id":""}`, false, nil, 400, "invalid_request"},
			{"user_id too long", "POST", orders, `{"user_id":"` + strings.Repeat("u", 65) + `"}`, false, nil, 400, "invalid_request"},
			{"user_id bad characters", "POST", orders, `{"user_id":"bob smith"}`, false, nil, 400, "invalid_request"},
			{"user_id number", "POST", orders, `{"user_id":42}`, false, nil, 400, "invalid_request"},
			{"user_id null", "POST", orders, `{"user_id":null}`, false, nil, 400, "invalid_request"},
			{"unknown field", "POST", orders, `{"user_id":"a","qty":2}`, false, nil, 400, "invalid_request"},
			{"idempotency key with spaces", "POST", orders, `{"user_id":"a"}`, false, map[string]string{"Idempotency-Key": "a b"}, 400, "invalid_request"},
			{"body over 64 KiB", "POST", orders, `{"user_id":"` + strings.Repeat("x", 70<<10) + `"}`, false, nil, 413, "payload_too_large"},
			{"unknown item", "POST", "/api/v1/items/999999/orders", `{"user_id":"a"}`, false, nil, 404, "not_found"},
			{"non-numeric item id", "POST", "/api/v1/items/abc/orders", `{"user_id":"a"}`, false, nil, 400, "invalid_request"},
			{"zero item id", "POST", "/api/v1/items/0/orders", `{"user_id":"a"}`, false, nil, 400, "invalid_request"},
			{"malformed order id", "GET", "/api/v1/orders/not-a-uuid", nil, false, nil, 400, "invalid_request"},
			{"unknown order", "GET", "/api/v1/orders/01a20197-766a-7198-9a10-76030851c922", nil, false, nil, 404, "not_found"},
			{"unknown route", "GET", "/api/v1/nope", nil, false, nil, 404, "not_found"},
			{"wrong method", "DELETE", orders, nil, false, nil, 405, "method_not_allowed"},
			{"admin create without token", "POST", "/api/v1/admin/items", `{"name":"x","stock":1}`, false, nil, 401, "unauthorized"},
			{"admin create wrong token", "POST", "/api/v1/admin/items", `{"name":"x","stock":1}`, false, map[string]string{"Authorization": "Bearer wrong-token-wrong-token"}, 401, "unauthorized"},
			{"admin item without token", "GET", fmt.Sprintf("/api/v1/admin/items/%d", it.ID), nil, false, nil, 401, "unauthorized"},
			{"admin stock without token", "PUT", stock, `{"stock":100}`, false, nil, 401, "unauthorized"},
			{"admin basic auth", "PUT", stock, `{"stock":100}`, false, map[string]string{"Authorization": "Basic " + apptest.Token}, 401, "unauthorized"},
			{"negative stock", "POST", "/api/v1/admin/items", `{"name":"x","stock":-1}`, true, nil, 400, "invalid_request"},
			{"absurd stock", "POST", "/api/v1/admin/items", `{"name":"x","stock":1e30}`, true, nil, 400, "invalid_request"},
			{"fractional stock", "POST", "/api/v1/admin/items", `{"name":"x","stock":1.5}`, true, nil, 400, "invalid_request"},
			{"stock over the cap", "POST", "/api/v1/admin/items", `{"name":"x","stock":100000001}`, true, nil, 400, "invalid_request"},
			{"stock as string", "POST", "/api/v1/admin/items", `{"name":"x","stock":"5"}`, true, nil, 400, "invalid_request"},
			{"missing name", "POST", "/api/v1/admin/items", `{"stock":5}`, true, nil, 400, "invalid_request"},
			{"empty name", "POST", "/api/v1/admin/items", `{"name":"","stock":5}`, true, nil, 400, "invalid_request"},
			{"unknown strategy", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"strategy":"magic"}`, true, nil, 400, "invalid_request"},
			{"negative price", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"price_cents":-1}`, true, nil, 400, "invalid_request"},
			{"bad time", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"starts_at":"tomorrow"}`, true, nil, 400, "invalid_request"},
			{"window backwards", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, true, nil, 400, "invalid_request"},
			{"zero buckets", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"buckets":0}`, true, nil, 400, "invalid_request"},
			{"65 buckets", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"buckets":65}`, true, nil, 400, "invalid_request"},
			{"negative buckets", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"buckets":-1}`, true, nil, 400, "invalid_request"},
			{"buckets as string", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"buckets":"3"}`, true, nil, 400, "invalid_request"},
			{"fractional buckets", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"buckets":1.5}`, true, nil, 400, "invalid_request"},
			{"too many buckets with lua-async", "POST", "/api/v1/admin/items", `{"name":"x","stock":500,"buckets":65,"strategy":"lua-async"}`, true, nil, 400, "invalid_request"},
			{"set stock negative", "PUT", stock, `{"stock":-3}`, true, nil, 400, "invalid_request"},
			{"set stock missing", "PUT", stock, `{}`, true, nil, 400, "invalid_request"},
			{"set stock below sold", "PUT", stock, `{"stock":0}`, true, nil, 409, "stock_below_sold"},
			{"set stock unknown item", "PUT", "/api/v1/admin/items/999999/stock", `{"stock":3}`, true, nil, 404, "not_found"},
			{"set stock non-numeric id", "PUT", "/api/v1/admin/items/x1/stock", `{"stock":3}`, true, nil, 400, "invalid_request"},
			// A strict API: one spelling of every path and field, no guessing.
			{"trailing slash", "POST", orders + "/", `{"user_id":"a"}`, false, nil, 404, "not_found"},
			{"trailing slash on GET", "GET", fmt.Sprintf("/api/v1/items/%d/", it.ID), nil, false, nil, 404, "not_found"},
			{"trailing slash on admin", "PUT", stock + "/", `{"stock":100}`, true, nil, 404, "not_found"},
			{"double slash", "POST", fmt.Sprintf("/api/v1//items/%d/orders", it.ID), `{"user_id":"a"}`, false, nil, 404, "not_found"},
			{"upper-case path", "POST", fmt.Sprintf("/API/V1/ITEMS/%d/ORDERS", it.ID), `{"user_id":"a"}`, false, nil, 404, "not_found"},
			{"field name in upper case", "POST", orders, `{"USER_ID":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"field name in mixed case", "POST", orders, `{"User_Id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"duplicate field", "POST", orders, `{"user_id":"first-buyer","user_id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"duplicate field, same value", "POST", orders, `{"user_id":"new-buyer","user_id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"duplicate field, other case", "POST", orders, `{"user_id":"new-buyer","USER_ID":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"item id with plus sign", "POST", fmt.Sprintf("/api/v1/items/+%d/orders", it.ID), `{"user_id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"item id with leading zero", "POST", fmt.Sprintf("/api/v1/items/0%d/orders", it.ID), `{"user_id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"item id with minus sign", "POST", fmt.Sprintf("/api/v1/items/-%d/orders", it.ID), `{"user_id":"new-buyer"}`, false, nil, 400, "invalid_request"},
			{"item id with spaces", "GET", fmt.Sprintf("/api/v1/items/%%20%d", it.ID), nil, false, nil, 400, "invalid_request"},
			{"item id too large", "GET", "/api/v1/items/9223372036854775808", nil, false, nil, 400, "invalid_request"},
			{"admin field name in other case", "POST", "/api/v1/admin/items", `{"Name":"x","stock":5}`, true, nil, 400, "invalid_request"},
			{"admin duplicate field", "POST", "/api/v1/admin/items", `{"name":"x","stock":5,"stock":6}`, true, nil, 400, "invalid_request"},
			{"set stock duplicate field", "PUT", stock, `{"stock":100,"stock":100}`, true, nil, 400, "invalid_request"},
			{"set stock field name in upper case", "PUT", stock, `{"STOCK":100}`, true, nil, 400, "invalid_request"},
			{"set stock with plus sign", "PUT", fmt.Sprintf("/api/v1/admin/items/+%d/stock", it.ID), `{"stock":100}`, true, nil, 400, "invalid_request"},
			{"admin bearer without token", "PUT", stock, `{"stock":100}`, false, map[string]string{"Authorization": "bearer"}, 401, "unauthorized"},
			{"admin bearer lower case, wrong token", "PUT", stock, `{"stock":100}`, false, map[string]string{"Authorization": "bearer wrong-token"}, 401, "unauthorized"},
			{"admin bearer token with a space", "PUT", stock, `{"stock":100}`, false, map[string]string{"Authorization": "Bearer " + apptest.Token + " x"}, 401, "unauthorized"},
			// Item names a page cannot show as a line of text.
			{"blank name", "POST", "/api/v1/admin/items", `{"name":"   ","stock":5}`, true, nil, 400, "invalid_request"},
			{"name of no-break spaces", "POST", "/api/v1/admin/items", `{"name":"\u00a0\u3000","stock":5}`, true, nil, 400, "invalid_request"},
			{"name of zero-width spaces", "POST", "/api/v1/admin/items", `{"name":"\u200b\ufeff","stock":5}`, true, nil, 400, "invalid_request"},
			{"name with NUL", "POST", "/api/v1/admin/items", `{"name":"a\u0000b","stock":5}`, true, nil, 400, "invalid_request"},
			{"name with a line break", "POST", "/api/v1/admin/items", `{"name":"a\nb","stock":5}`, true, nil, 400, "invalid_request"},
			{"name with a C1 control", "POST", "/api/v1/admin/items", `{"name":"a\u009b31m","stock":5}`, true, nil, 400, "invalid_request"},
			{"name with DEL", "POST", "/api/v1/admin/items", "{\"name\":\"a\x7f\",\"stock\":5}", true, nil, 400, "invalid_request"},
			// Query parameters: each read once, numbers spelt as ids are.
			{"list limit twice", "GET", "/api/v1/admin/items?limit=1&limit=200000", nil, true, nil, 400, "invalid_request"},
			{"list limit with a leading zero", "GET", "/api/v1/admin/items?limit=05", nil, true, nil, 400, "invalid_request"},
			{"list before with a leading zero", "GET", fmt.Sprintf("/api/v1/admin/items?before=0%d", it.ID+1), nil, true, nil, 400, "invalid_request"},
			{"list status twice", "GET", "/api/v1/admin/items?status=on_sale&status=ended", nil, true, nil, 400, "invalid_request"},
			{"dead letters limit with a leading zero", "GET", fmt.Sprintf("/api/v1/admin/items/%d/dead-letters?limit=010", it.ID), nil, true, nil, 400, "invalid_request"},
			{"reconcile with a semicolon in the query", "POST", fmt.Sprintf("/api/v1/admin/items/%d/reconcile?dry_run=true;x=1", it.ID), nil, true, nil, 400, "invalid_request"},
			{"reconcile dry_run twice", "POST", fmt.Sprintf("/api/v1/admin/items/%d/reconcile?dry_run=true&dry_run=false", it.ID), nil, true, nil, 400, "invalid_request"},
		}
		check := func(t *testing.T, name string, status int, code string, send func() apptest.Response) {
			t.Helper()
			before := snapshot(t, b, c, it.ID)
			r := send()
			if r.Status != status || r.ErrorCode() != code {
				t.Errorf("got %d %s, want %d %s", r.Status, r.Body, status, code)
			}
			for _, field := range []string{"buckets", "name", "limit", "before", "status", "dry_run", "Idempotency-Key", "Authorization"} {
				if strings.Contains(name, field) && !strings.Contains(string(r.Body), field) {
					t.Errorf("the error does not name %s: %s", field, r.Body)
				}
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			if after := snapshot(t, b, c, it.ID); !reflect.DeepEqual(before, after) {
				t.Errorf("state changed:\n before %+v\n after  %+v", before, after)
			}
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				check(t, tc.name, tc.status, tc.code, func() apptest.Response {
					return c.Must(t, tc.method, tc.path, tc.body, tc.admin, tc.header)
				})
			})
		}
		// A header the API reads one value of, given twice: which one a
		// proxy or a library keeps differs, so neither is taken.
		auth := "Bearer " + apptest.Token
		repeats := []struct {
			name, method, path string
			body               any
			header             http.Header
		}{
			{"two Idempotency-Key headers", "POST", orders, `{"user_id":"new-buyer"}`, http.Header{"Idempotency-Key": {"k1", "k2"}}},
			{"two equal Idempotency-Key headers", "POST", orders, `{"user_id":"new-buyer"}`, http.Header{"Idempotency-Key": {"k1", "k1"}}},
			{"two admin Authorization headers", "PUT", stock, `{"stock":100}`, http.Header{"Authorization": {auth, auth}}},
			{"two admin Authorization headers, one wrong", "PUT", stock, `{"stock":100}`, http.Header{"Authorization": {"Bearer wrong-token", auth}}},
		}
		for _, tc := range repeats {
			t.Run(tc.name, func(t *testing.T) {
				check(t, tc.name, 400, "invalid_request", func() apptest.Response {
					r, err := c.DoHeader(tc.method, tc.path, tc.body, false, tc.header)
					if err != nil {
						t.Fatalf("%s %s: %v", tc.method, tc.path, err)
					}
					return r
				})
			})
		}
	})
}
