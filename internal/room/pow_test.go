package room_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

func challenge(t testing.TB, k room.PassKey, item int64, user string, bits int, now time.Time) (string, time.Time) {
	t.Helper()
	c, exp, err := room.IssueChallenge(k, item, user, bits, now)
	if err != nil {
		t.Fatalf("IssueChallenge(%d, %q, %d): %v", item, user, bits, err)
	}
	return c, exp
}

// short finds a nonce whose hash has exactly bits leading zero bits: one
// short of bits+1.
func short(t testing.TB, c string, bits int) string {
	t.Helper()
	for n := uint64(0); n < 1<<30; n++ {
		if nonce := strconv.FormatUint(n, 10); room.PoWZeroBits(c, nonce) == bits {
			return nonce
		}
	}
	t.Fatalf("no nonce with exactly %d zero bits", bits)
	return ""
}

func TestPoWRoundTrip(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	c, exp := challenge(t, k, 42, "alice", 12, passNow)
	if want := passNow.Add(room.ChallengeTTL); !exp.Equal(want) {
		t.Errorf("expires = %v, want %v (issued + %v)", exp, want, room.ChallengeTTL)
	}
	if strings.ContainsAny(c, "+/=:") {
		t.Errorf("challenge %q is not base64url without padding", c)
	}
	if len(c) > 100 {
		t.Errorf("challenge is %d characters, want a compact one (<= 100)", len(c))
	}
	nonce := room.SolvePoW(c, 12)
	if z := room.PoWZeroBits(c, nonce); z < 12 {
		t.Fatalf("SolvePoW's nonce %s has %d zero bits", nonce, z)
	}
	n, _ := strconv.Atoi(nonce)
	for i := range n {
		if room.PoWZeroBits(c, strconv.Itoa(i)) >= 12 {
			t.Fatalf("SolvePoW answered %s, but %d comes first and works", nonce, i)
		}
	}
	if err := room.VerifyPoW(k, c, nonce, 42, "alice", 12, passNow); err != nil {
		t.Fatalf("VerifyPoW of a good solution: %v", err)
	}
	// Good until the last millisecond before expiry; a lower setting than
	// the challenge's is met by the same work.
	if err := room.VerifyPoW(k, c, nonce, 42, "alice", 12, exp.Add(-time.Millisecond)); err != nil {
		t.Errorf("VerifyPoW just before expiry: %v", err)
	}
	if err := room.VerifyPoW(k, c, nonce, 42, "alice", 8, passNow); err != nil {
		t.Errorf("VerifyPoW with the setting lowered to 8: %v", err)
	}
	// Two challenges for the same user and item in the same millisecond
	// are the same string: harmless, see the replay note in pow.go.
	if again, _ := challenge(t, k, 42, "alice", 12, passNow); again != c {
		t.Errorf("same inputs, another challenge: %q vs %q", again, c)
	}
}

func TestPoWRejections(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	const bits = 10
	c, exp := challenge(t, k, 42, "alice", bits, passNow)
	good := room.SolvePoW(c, bits)
	oneShort := short(t, c, bits-1)
	other, _ := challenge(t, testKey(t, 'o'), 42, "alice", bits, passNow)
	otherGood := room.SolvePoW(other, bits)
	easy, _ := challenge(t, k, 42, "alice", bits-2, passNow)
	easyButEnough := room.SolvePoW(easy, bits) // enough work, but the challenge asked for less
	pass := issue(t, k, samplePass)
	flip := []byte(c)
	flip[len(flip)/2] ^= 1
	cases := []struct {
		name             string
		challenge, nonce string
		item             int64
		user             string
		now              time.Time
		want             error
	}{
		{"no challenge", "", good, 42, "alice", passNow, room.ErrPoWRequired},
		{"no challenge nor nonce", "", "", 42, "alice", passNow, room.ErrPoWRequired},
		{"no nonce", c, "", 42, "alice", passNow, room.ErrPoWBadNonce},
		{"too few zero bits", c, oneShort, 42, "alice", passNow, room.ErrPoWTooEasy},
		{"issued for fewer bits", easy, easyButEnough, 42, "alice", passNow, room.ErrPoWTooEasy},
		{"expired at expiry", c, good, 42, "alice", exp, room.ErrPoWExpired},
		{"expired after", c, good, 42, "alice", exp.Add(time.Hour), room.ErrPoWExpired},
		{"other item", c, good, 43, "alice", passNow, room.ErrPoWWrongItem},
		{"other user", c, good, 42, "bob", passNow, room.ErrPoWWrongUser},
		{"another key", other, otherGood, 42, "alice", passNow, room.ErrPoWForged},
		{"a flipped bit", string(flip), good, 42, "alice", passNow, room.ErrPoWForged},
		{"truncated", c[:len(c)-1], good, 42, "alice", passNow, room.ErrPoWForged},
		{"extra byte", c + "A", good, 42, "alice", passNow, room.ErrPoWForged},
		{"a pass of the same key", pass, good, 42, "alice", passNow, room.ErrPoWForged},
		{"huge", strings.Repeat("A", 10_000), good, 42, "alice", passNow, room.ErrPoWForged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := room.VerifyPoW(k, tc.challenge, tc.nonce, tc.item, tc.user, bits, tc.now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyPoW = %v, want %v", err, tc.want)
			}
			if tc.want != room.ErrPoWRequired && !errors.Is(err, room.ErrPoWInvalid) {
				t.Errorf("%v does not match ErrPoWInvalid", err)
			}
		})
	}
	// And the other way round: a challenge is not a pass of the same key.
	if _, err := k.Verify(c, 42, "alice", passNow); !errors.Is(err, room.ErrPassForged) {
		t.Errorf("a challenge verified as a pass: %v, want ErrPassForged", err)
	}
}

// TestPoWMalformedNonces: a nonce is 1 to 20 ASCII digits, nothing else,
// even when its hash would happen to have the zero bits.
func TestPoWMalformedNonces(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	c, _ := challenge(t, k, 42, "alice", 1, passNow)
	for _, nonce := range []string{
		"", " 1", "1 ", "+1", "-1", "0x1f", "1e3", "1.0", "١٢", // Arabic-Indic digits
		strings.Repeat("9", 21), "12\x00", "12:3", "abc",
	} {
		if err := room.VerifyPoW(k, c, nonce, 42, "alice", 1, passNow); !errors.Is(err, room.ErrPoWBadNonce) {
			t.Errorf("nonce %q: VerifyPoW = %v, want ErrPoWBadNonce", nonce, err)
		}
	}
	// The longest allowed nonce is accepted when it does the work.
	for n := uint64(1e19); ; n++ {
		nonce := strconv.FormatUint(n, 10)
		if len(nonce) != room.MaxNonceLen {
			t.Fatalf("%s is not %d digits", nonce, room.MaxNonceLen)
		}
		if room.PoWZeroBits(c, nonce) >= 1 {
			if err := room.VerifyPoW(k, c, nonce, 42, "alice", 1, passNow); err != nil {
				t.Errorf("a %d-digit nonce: %v", room.MaxNonceLen, err)
			}
			break
		}
	}
}

func TestPoWBadArguments(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	for _, tc := range []struct {
		name string
		key  room.PassKey
		item int64
		user string
		bits int
	}{
		{"zero key", room.PassKey{}, 42, "alice", 8},
		{"zero item", k, 0, "alice", 8},
		{"no user", k, 42, "", 8},
		{"bad user", k, 42, "al ice", 8},
		{"long user", k, 42, strings.Repeat("u", 65), 8},
		{"zero bits", k, 42, "alice", 0},
		{"too many bits", k, 42, "alice", room.MaxPoWBits + 1},
	} {
		if _, _, err := room.IssueChallenge(tc.key, tc.item, tc.user, tc.bits, passNow); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("IssueChallenge %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	c, _ := challenge(t, k, 42, "alice", 1, passNow)
	// Off (0 bits) is the caller's decision, never "anything goes" here.
	for _, bits := range []int{-1, 0, room.MaxPoWBits + 1} {
		if err := room.VerifyPoW(k, c, "0", 42, "alice", bits, passNow); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("VerifyPoW with %d bits: %v, want ErrInvalid", bits, err)
		}
	}
	if err := room.VerifyPoW(room.PassKey{}, c, "0", 42, "alice", 1, passNow); !errors.Is(err, room.ErrInvalid) {
		t.Errorf("VerifyPoW with the zero key: %v, want ErrInvalid", err)
	}
	// The longest user id fits the length bound on challenges.
	long := strings.Repeat("u", 64)
	lc, _ := challenge(t, k, 1<<62, long, room.MaxPoWBits, passNow)
	if err := room.VerifyPoW(k, lc, "0", 1<<62, long, room.MaxPoWBits, passNow); !errors.Is(err, room.ErrPoWTooEasy) {
		t.Errorf("the longest challenge: %v, want it read and refused for the work (ErrPoWTooEasy)", err)
	}
}

// FuzzVerifyPoW: whatever the challenge and nonce, VerifyPoW does not
// panic, and it accepts only the genuine challenge with a decimal nonce
// that does the work.
func FuzzVerifyPoW(f *testing.F) {
	k := testKey(f, 'k')
	c, _ := challenge(f, k, 42, "alice", 4, passNow)
	f.Add(c, room.SolvePoW(c, 4))
	f.Add(c, "0")
	f.Add(c+"A", "1")
	f.Add(c[:10], "123")
	f.Add("", "")
	f.Add("!!!!", "99999999999999999999")
	f.Add(issue(f, k, samplePass), "7")
	f.Fuzz(func(t *testing.T, ch, nonce string) {
		err := room.VerifyPoW(k, ch, nonce, 42, "alice", 4, passNow)
		if err == nil {
			if ch != c {
				t.Fatalf("accepted a challenge that was not issued: %q", ch)
			}
			if room.PoWZeroBits(ch, nonce) < 4 {
				t.Fatalf("accepted nonce %q without the work", nonce)
			}
			return
		}
		if !errors.Is(err, room.ErrPoWInvalid) && !errors.Is(err, room.ErrPoWRequired) {
			t.Fatalf("VerifyPoW(%q, %q) = %v, neither required nor invalid", ch, nonce, err)
		}
	})
}

// BenchmarkVerifyPoW: a join's check is one HMAC and one SHA-256, about
// what BenchmarkPassVerify costs plus a hash.
func BenchmarkVerifyPoW(b *testing.B) {
	k := testKey(b, 'k')
	c, _ := challenge(b, k, 42, "alice", 8, passNow)
	nonce := room.SolvePoW(c, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := room.VerifyPoW(k, c, nonce, 42, "alice", 8, passNow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIssueChallenge: a challenge costs one HMAC.
func BenchmarkIssueChallenge(b *testing.B) {
	k := testKey(b, 'k')
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := room.IssueChallenge(k, 42, "alice", 8, passNow); err != nil {
			b.Fatal(err)
		}
	}
}
