package handler

import (
	"encoding/json"
	"testing"
	"time"
)

// The hand-written renderer writes exactly what encoding/json writes.
func TestAppendOrderJSONMatchesEncodingJSON(t *testing.T) {
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
