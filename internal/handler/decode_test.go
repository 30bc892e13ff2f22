package handler

import (
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
