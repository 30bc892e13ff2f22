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
// never writes (another version, a zero field, a bad user id, trailing
// varint garbage) are refused as forged, not half-read.
func TestPassSignedButNotAPass(t *testing.T) {
	k, err := NewPassKey([]byte(strings.Repeat("k", MinPassKeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	payload := func(version byte, item, ticket, exp uint64, user string) []byte {
		b := []byte{version}
		b = binary.AppendUvarint(b, item)
		b = binary.AppendUvarint(b, ticket)
		b = binary.AppendUvarint(b, exp)
		return append(b, user...)
	}
	exp := uint64(time.Now().Add(time.Hour).Unix())
	good := payload(1, 42, 7, exp, "alice")
	if _, err := k.Verify(base64.RawURLEncoding.EncodeToString(k.mac(good, good)), 42, "alice", time.Now()); err != nil {
		t.Fatalf("the genuine payload is refused: %v", err)
	}
	for name, p := range map[string][]byte{
		"version 2":        payload(2, 42, 7, exp, "alice"),
		"zero item":        payload(1, 0, 7, exp, "alice"),
		"zero ticket":      payload(1, 42, 0, exp, "alice"),
		"zero expiry":      payload(1, 42, 7, 0, "alice"),
		"item above int64": payload(1, 1<<63, 7, exp, "alice"),
		"no user":          payload(1, 42, 7, exp, ""),
		"bad user":         payload(1, 42, 7, exp, "al ice"),
		"only a version":   {1},
		"empty":            {},
	} {
		tok := base64.RawURLEncoding.EncodeToString(k.mac(p, p))
		if _, err := k.Verify(tok, 42, "alice", time.Now()); !errors.Is(err, ErrPassForged) {
			t.Errorf("%s: Verify = %v, want ErrPassForged", name, err)
		}
	}
}
