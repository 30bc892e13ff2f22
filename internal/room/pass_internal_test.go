package room

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPassSignedButNotAPass: payloads signed by the right key that Issue
// never writes (another version, version 1 without a line, a zero field, a
// short line, a bad user id) are refused as forged, not half-read.
func TestPassSignedButNotAPass(t *testing.T) {
	t.Parallel()
	k, err := NewPassKey([]byte(strings.Repeat("k", MinPassKeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	line := Line{9, 8, 7, 6, 5, 4, 3, 2}
	payload := func(version byte, item, ticket, exp uint64, line []byte, user string) []byte {
		b := []byte{version}
		b = binary.AppendUvarint(b, item)
		b = binary.AppendUvarint(b, ticket)
		b = binary.AppendUvarint(b, exp)
		b = append(b, line...)
		return append(b, user...)
	}
	exp := uint64(time.Now().Add(time.Hour).Unix())
	good := payload(2, 42, 7, exp, line[:], "alice")
	if _, err := k.VerifyIn(base64.RawURLEncoding.EncodeToString(k.mac(good, good)), 42, line, "alice", time.Now()); err != nil {
		t.Fatalf("the genuine payload is refused: %v", err)
	}
	for name, p := range map[string][]byte{
		"version 1, no line": payload(1, 42, 7, exp, nil, "alice"),
		"version 3":          payload(3, 42, 7, exp, line[:], "alice"),
		"zero item":          payload(2, 0, 7, exp, line[:], "alice"),
		"zero ticket":        payload(2, 42, 0, exp, line[:], "alice"),
		"zero expiry":        payload(2, 42, 7, 0, line[:], "alice"),
		"item above int64":   payload(2, 1<<63, 7, exp, line[:], "alice"),
		"no line, no user":   payload(2, 42, 7, exp, nil, ""),
		"short line":         payload(2, 42, 7, exp, line[:5], ""),
		"no user":            payload(2, 42, 7, exp, line[:], ""),
		"bad user":           payload(2, 42, 7, exp, line[:], "al ice"),
		"only a version":     {2},
		"empty":              {},
	} {
		tok := base64.RawURLEncoding.EncodeToString(k.mac(p, p))
		if _, err := k.VerifyIn(tok, 42, line, "alice", time.Now()); !errors.Is(err, ErrPassForged) {
			t.Errorf("%s: Verify = %v, want ErrPassForged", name, err)
		}
	}
}
