package handler

import (
	"encoding/json"
	"testing"
	"time"
)

// The hand-written renderer writes exactly what encoding/json writes.
func TestAppendOrderJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 21, 27, 42_000_000, time.UTC)
	deadline := at.Add(15 * time.Minute).Add(123 * time.Nanosecond)
	cases := []orderJSON{
		{ID: "01a202c6-6882-7ce2-b57e-b7d09bd66cc5", ItemID: 7, UserID: "alice", Status: "pending", CreatedAt: at, UpdatedAt: at},
		{ID: "01a202c6-6882-7ce2-b57e-b7d09bd66cc5", ItemID: 1 << 40, UserID: "u.s_e:r@x-1", Status: "created", ExpiresAt: &deadline,
			CreatedAt: at, UpdatedAt: at.Add(time.Second)},
		{ID: "x", ItemID: 0, UserID: "bob", Status: "failed", Reason: "sold_out", CreatedAt: time.Time{}, UpdatedAt: at},
		{ID: "x", UserID: "needs <escaping> & \"quotes\"", Status: "created", CreatedAt: at, UpdatedAt: at},
		{ID: "x", UserID: "ünicode", Status: "created", CreatedAt: at.In(time.FixedZone("X", 3600)), UpdatedAt: at},
	}
	for _, v := range cases {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := marshalOrder(v); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// The fast path reads exactly what the strict decoder reads, for an order
// and for a join, and leaves everything else to it.
func TestFastOrderBodyAgreesWithTheDecoder(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"user_id":"alice"}`, `{"user_id":"u.s_e:r@x-1"}`, `{"user_id":""}`, `{"user_id":"<b>&"}`,
		`{"user_id":"a\"b"}`, `{"user_id":"a\\u0041"}`, `{ "user_id":"alice"}`, `{"user_id":"alice","x":1}`,
		`{"user_id":"alice"}{"user_id":"bob"}`, `{"user_id":"ünicode"}`, `{"user_id":"a"} `, `{"user_id":"`,
		`{"USER_ID":"alice"}`, `{"User_id":"alice"}`, `{"user_id":"a","user_id":"b"}`, `{"user_id":"a","USER_ID":"a"}`,
		`{"user_id":"alice"},`, `{"user_id":"alice"}}`, `{"user_id":"a\"}`,
		`{"user_id":"a","pow":{"challenge":"c","nonce":"1"}}`, `{"user_id":"a","pow":null}`, `{"pow":null,"user_id":"a"}`,
	} {
		fast, took := fastUserIDBody([]byte(body))
		var order placeOrderRequest
		errOrder := decodeStrict([]byte(body), &order)
		var join joinRequest
		errJoin := decodeStrict([]byte(body), &join)
		switch {
		case !took:
			// The decoder decides; nothing to compare.
		case errOrder != nil || errJoin != nil:
			t.Errorf("%s: fast path took a body the decoder refuses (%v, %v)", body, errOrder, errJoin)
		case order.UserID == nil || *fast != *order.UserID || join.UserID == nil || *fast != *join.UserID || join.PoW != nil:
			t.Errorf("%s: fast path read %q, decoder %v (order) and %+v (join)", body, *fast, order.UserID, join)
		}
	}
	if u, ok := fastUserIDBody([]byte(`{"user_id":"alice"}`)); !ok || *u != "alice" {
		t.Errorf("the common body did not take the fast path")
	}
}
