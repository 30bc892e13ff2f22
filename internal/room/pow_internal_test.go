package room

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPoWSignedButNotAChallenge: payloads signed as challenges by the right
// key that IssueChallenge never writes (another version, a zero field, bits
// out of range, a bad user id) are refused as forged, not half-read; and a
// payload signed as a pass (without the challenges' domain) is forged too.
func TestPoWSignedButNotAChallenge(t *testing.T) {
	t.Parallel()
	k, err := NewPassKey([]byte(strings.Repeat("k", MinPassKeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	payload := func(version byte, item, exp uint64, bits byte, user string) []byte {
		b := []byte{version}
		b = binary.AppendUvarint(b, item)
		b = binary.AppendUvarint(b, exp)
		b = append(b, bits)
		return append(b, user...)
	}
	exp := uint64(now.Add(time.Minute).UnixMilli())
	// bits 1: the nonce "0" does the work for about half the payloads; find
	// one that does for the genuine payload, so each refusal below is the
	// payload's, not the work's.
	good := payload(1, 42, exp, 1, "alice")
	goodTok := base64.RawURLEncoding.EncodeToString(k.powMAC(good, good))
	nonce := ""
	for d := '0'; d <= '9' && nonce == ""; d++ {
		if PoWZeroBits(goodTok, string(d)) >= 1 {
			nonce = string(d)
		}
	}
	if nonce == "" {
		t.Fatal("no one-digit nonce with a zero bit")
	}
	if err := VerifyPoW(k, goodTok, nonce, 42, "alice", 1, now); err != nil {
		t.Fatalf("the genuine payload is refused: %v", err)
	}
	if err := VerifyPoW(k, base64.RawURLEncoding.EncodeToString(k.mac(good, good)), nonce, 42, "alice", 1, now); !errors.Is(err, ErrPoWForged) {
		t.Errorf("the payload signed without the challenges' domain: %v, want ErrPoWForged", err)
	}
	for name, p := range map[string][]byte{
		"version 2":        payload(2, 42, exp, 1, "alice"),
		"zero item":        payload(1, 0, exp, 1, "alice"),
		"zero expiry":      payload(1, 42, 0, 1, "alice"),
		"item above int64": payload(1, 1<<63, exp, 1, "alice"),
		"zero bits":        payload(1, 42, exp, 0, "alice"),
		"33 bits":          payload(1, 42, exp, 33, "alice"),
		"no user":          payload(1, 42, exp, 1, ""),
		"bad user":         payload(1, 42, exp, 1, "al ice"),
		"only a version":   {1},
		"empty":            {},
	} {
		tok := base64.RawURLEncoding.EncodeToString(k.powMAC(p, p))
		if err := VerifyPoW(k, tok, nonce, 42, "alice", 1, now); !errors.Is(err, ErrPoWForged) {
			t.Errorf("%s: VerifyPoW = %v, want ErrPoWForged", name, err)
		}
	}
}
