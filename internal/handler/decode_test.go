package handler

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The strict decoder takes each known field spelled exactly, once, and
// refuses what encoding/json alone would take: names in another case and
// repeated names (which it resolves to the last).
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type nested struct {
		Stock *int64     `json:"stock"`
		At    *time.Time `json:"starts_at"`
		Tags  []any      `json:"tags"`
		Extra any        `json:"extra"`
	}
	for _, tc := range []struct {
		body, wantErr string // wantErr: a part of the error, "" for none
	}{
		{`{"stock":5}`, ""},
		{`{"stock":5,"starts_at":"2030-01-01T00:00:00Z","tags":[1,{"a":1},[{"a":2}]],"extra":{"a":{"b":1},"c":[]}}`, ""},
		{`{"st\u006fck":5}`, ""}, // the same name, escaped
		{`{}`, ""},
		{`{"STOCK":5}`, `unknown field "STOCK"`},
		{`{"Stock":5}`, `unknown field "Stock"`},
		{`{"stock":5,"stock":6}`, `field "stock" appears more than once`},
		{`{"stock":5,"st\u006fck":5}`, `field "stock" appears more than once`},
		{`{"extra":{"a":1,"a":2}}`, `field "a" appears more than once`},
		{`{"tags":[{"a":1,"b":{"c":1,"c":1}}]}`, `field "c" appears more than once`},
		{`{"extra":{"a":1},"tags":[],"extra":{}}`, `field "extra" appears more than once`},
		{`{"extra":{"stock":1},"stock":1}`, ""}, // one per object
		{`{"nope":1}`, `unknown field "nope"`},
		{`{"stock":"5"}`, "stock must be"},
		{`{"stock":5}{}`, "exactly one JSON object"},
		{`[]`, "must be a JSON object"},
	} {
		var v nested
		err := decodeStrict([]byte(tc.body), &v)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: got %v, want no error", tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want an error with %q", tc.body, err, tc.wantErr)
		}
	}
}

// The Authorization scheme is case-insensitive (RFC 9110 section 11.1); the
// token is one token68 after one or more spaces.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"bEaReR abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer a b", "", false},
		{"Bearer\tabc", "", false},
		{"Bearerabc", "", false},
		{"Basic abc", "", false},
		{" Bearer abc", "", false},
		{"", "", false},
	} {
		token, ok := bearerToken(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("%q: got %q %v, want %q %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

// Nested objects (redteam #10): their names are case-sensitive too, at any
// depth and inside arrays, and a wrong type in one is named for what it is
// (an object), not "an RFC 3339 time string".
func TestDecodeStrictNested(t *testing.T) {
	t.Parallel()
	type leaf struct {
		N *int `json:"n"`
	}
	type inner struct {
		Rate *int   `json:"admit_per_second"`
		Leaf *leaf  `json:"leaf"`
		List []leaf `json:"list"`
	}
	type outer struct {
		Room *inner         `json:"waiting_room"`
		Pow  *powJSON       `json:"pow"`
		At   *time.Time     `json:"starts_at"`
		Any  any            `json:"any"`
		Map  map[string]int `json:"map"`
	}
	for _, tc := range []struct{ body, wantErr string }{
		{`{"waiting_room":{"admit_per_second":5,"leaf":{"n":1},"list":[{"n":2}]},"pow":{"challenge":"c","nonce":"1"}}`, ""},
		{`{"any":{"Whatever":1},"map":{"Key":1,"key":2}}`, ""}, // free-form values keep their names
		{`{"waiting_room":{"Admit_Per_Second":5}}`, `unknown field "Admit_Per_Second"`},
		{`{"waiting_room":{"ADMIT_PER_SECOND":5}}`, `unknown field "ADMIT_PER_SECOND"`},
		{`{"pow":{"CHALLENGE":"c","Nonce":"1"}}`, `unknown field "CHALLENGE"`},
		{`{"waiting_room":{"leaf":{"N":1}}}`, `unknown field "N"`},
		{`{"waiting_room":{"list":[{"n":1},{"N":2}]}}`, `unknown field "N"`},
		{`{"waiting_room":[]}`, "waiting_room must be a JSON object"},
		{`{"pow":[]}`, "pow must be a JSON object"},
		{`{"pow":"x"}`, "pow must be a JSON object"},
		{`{"waiting_room":{"leaf":5}}`, "must be a JSON object"},
		{`{"starts_at":5}`, "RFC 3339"},
	} {
		var v outer
		err := decodeStrict([]byte(tc.body), &v)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: got %v, want no error", tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want an error with %q", tc.body, err, tc.wantErr)
		}
	}
}

// FuzzDecodeNestedCase: a join body whose names have any letters' case
// flipped (mask picks which) is taken only when no name changed: the
// nested "pow" object's names are as strict as the top's.
func FuzzDecodeNestedCase(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(1) << 20)
	f.Add(^uint64(0))
	const tmpl = `{"%s":"alice","%s":{"%s":"c","%s":"1"}}`
	names := []string{"user_id", "pow", "challenge", "nonce"}
	f.Fuzz(func(t *testing.T, mask uint64) {
		bit, changed := 0, false
		args := make([]any, len(names))
		for i, n := range names {
			b := []byte(n)
			for j := range b {
				if mask>>(bit%64)&1 == 1 && b[j] >= 'a' && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
					changed = true
				}
				bit++
			}
			args[i] = string(b)
		}
		body := fmt.Sprintf(tmpl, args...)
		var req joinRequest
		err := decodeStrict([]byte(body), &req)
		if changed && err == nil {
			t.Fatalf("%s: taken, want a refusal of the name in another case", body)
		}
		if !changed && (err != nil || req.PoW == nil || req.PoW.Challenge != "c" || req.PoW.Nonce != "1") {
			t.Fatalf("%s: got %v %+v, want it decoded", body, err, req.PoW)
		}
	})
}
