package room_test

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

func testKey(t testing.TB, fill byte) room.PassKey {
	t.Helper()
	k, err := room.NewPassKey([]byte(strings.Repeat(string(fill), room.MinPassKeyLen)))
	if err != nil {
		t.Fatalf("NewPassKey: %v", err)
	}
	return k
}

var (
	passNow    = time.Unix(1_800_000_000, 0)
	sampleLine = room.Line{1, 2, 3, 4, 5, 6, 7, 8}
	samplePass = room.Pass{ItemID: 42, UserID: "alice", Ticket: 7, Expiry: passNow.Add(time.Minute), Line: sampleLine}
)

func issue(t testing.TB, k room.PassKey, p room.Pass) string {
	t.Helper()
	tok, err := k.Issue(p)
	if err != nil {
		t.Fatalf("Issue(%+v): %v", p, err)
	}
	return tok
}

func TestPassRoundTrip(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	tok := issue(t, k, samplePass)
	if strings.ContainsAny(tok, "+/=") {
		t.Errorf("pass %q is not base64url without padding", tok)
	}
	if len(tok) > 100 {
		t.Errorf("pass is %d characters, want a compact one (<= 100)", len(tok))
	}
	got, err := k.Verify(tok, 42, "alice", passNow)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got != samplePass {
		t.Errorf("Verify = %+v, want %+v", got, samplePass)
	}
}

func TestPassRejections(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	tok := issue(t, k, samplePass)
	other := issue(t, testKey(t, 'o'), samplePass)
	cases := []struct {
		name  string
		token string
		item  int64
		user  string
		now   time.Time
		want  error
	}{
		{"missing", "", 42, "alice", passNow, room.ErrPassMissing},
		{"not base64", "!!!" + tok, 42, "alice", passNow, room.ErrPassForged},
		{"too short", tok[:20], 42, "alice", passNow, room.ErrPassForged},
		{"truncated mac", tok[:len(tok)-2], 42, "alice", passNow, room.ErrPassForged},
		{"extra byte", tok + "A", 42, "alice", passNow, room.ErrPassForged},
		{"huge", strings.Repeat("A", 10_000), 42, "alice", passNow, room.ErrPassForged},
		{"another key", other, 42, "alice", passNow, room.ErrPassForged},
		{"wrong item", tok, 43, "alice", passNow, room.ErrPassWrongItem},
		{"wrong user", tok, 42, "bob", passNow, room.ErrPassWrongUser},
		{"expired at expiry", tok, 42, "alice", samplePass.Expiry, room.ErrPassExpired},
		{"expired after", tok, 42, "alice", samplePass.Expiry.Add(time.Hour), room.ErrPassExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.Verify(c.token, c.item, c.user, c.now)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if !errors.Is(err, room.ErrPassRejected) {
				t.Errorf("%v does not match ErrPassRejected", err)
			}
		})
	}
	if _, err := k.Verify(tok, 42, "alice", samplePass.Expiry.Add(-time.Nanosecond)); err != nil {
		t.Errorf("Verify a nanosecond before expiry = %v, want nil", err)
	}
}

// rawPass splits a genuine pass into its fields, to tamper with one at a time.
type rawPass struct {
	item, ticket, exp uint64
	line              room.Line
	user              string
	mac               []byte
}

func splitPass(t *testing.T, tok string) rawPass {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || b[0] != 2 {
		t.Fatalf("decode pass %q: %v (version %d)", tok, err, b[0])
	}
	var p rawPass
	p.mac = b[len(b)-32:]
	b = b[1 : len(b)-32]
	for _, f := range []*uint64{&p.item, &p.ticket, &p.exp} {
		v, n := binary.Uvarint(b)
		*f, b = v, b[n:]
	}
	copy(p.line[:], b)
	p.user = string(b[len(p.line):])
	return p
}

func (p rawPass) encode() string {
	b := []byte{2}
	b = binary.AppendUvarint(b, p.item)
	b = binary.AppendUvarint(b, p.ticket)
	b = binary.AppendUvarint(b, p.exp)
	b = append(b, p.line[:]...)
	b = append(b, p.user...)
	return base64.RawURLEncoding.EncodeToString(append(b, p.mac...))
}

func TestPassTamperingEachField(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	tok := issue(t, k, samplePass)
	orig := splitPass(t, tok)
	if orig.encode() != tok {
		t.Fatalf("test's encoder disagrees with Issue: %q vs %q", orig.encode(), tok)
	}
	if _, err := k.Verify(orig.encode(), 42, "alice", passNow); err != nil {
		t.Fatalf("untouched pass: %v", err)
	}
	tamper := map[string]func(p *rawPass){
		// Each tampering is what an attacker would want, and each is
		// checked with the arguments that would then match.
		"item":   func(p *rawPass) { p.item = 43 },
		"ticket": func(p *rawPass) { p.ticket = 1 },
		"expiry": func(p *rawPass) { p.exp += 3600 },
		"user":   func(p *rawPass) { p.user = "mallory" },
		"line":   func(p *rawPass) { p.line[7] ^= 1 },
		"mac":    func(p *rawPass) { p.mac = append([]byte(nil), p.mac...); p.mac[31] ^= 1 },
	}
	for name, f := range tamper {
		t.Run(name, func(t *testing.T) {
			p := orig
			f(&p)
			_, err := k.VerifyIn(p.encode(), int64(p.item), p.line, p.user, passNow)
			if !errors.Is(err, room.ErrPassForged) {
				t.Fatalf("Verify(tampered %s) = %v, want ErrPassForged", name, err)
			}
		})
	}
	// Every single bit of the token flipped is refused.
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range raw {
		for bit := range 8 {
			b := append([]byte(nil), raw...)
			b[i] ^= 1 << bit
			if _, err := k.Verify(base64.RawURLEncoding.EncodeToString(b), 42, "alice", passNow); err == nil {
				t.Fatalf("pass with byte %d bit %d flipped verified", i, bit)
			}
		}
	}
}

// TestPassLine: a pass is good only in the line it was issued in: VerifyIn
// refuses it in another line of the same item's room (after every other
// check), and the line is read back as signed.
func TestPassLine(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	tok := issue(t, k, samplePass)
	got, err := k.VerifyIn(tok, 42, sampleLine, "alice", passNow)
	if err != nil || got.Line != sampleLine {
		t.Fatalf("VerifyIn in its own line = %+v, %v; want line %v", got, err, sampleLine)
	}
	newLine := sampleLine
	newLine[0] ^= 0x80
	for _, c := range []struct {
		name string
		item int64
		user string
		now  time.Time
		want error
	}{
		{"another line", 42, "alice", passNow, room.ErrPassWrongLine},
		{"another line and item", 43, "alice", passNow, room.ErrPassWrongItem},
		{"another line and user", 42, "bob", passNow, room.ErrPassWrongUser},
		{"another line, expired", 42, "alice", samplePass.Expiry, room.ErrPassExpired},
	} {
		_, err := k.VerifyIn(tok, c.item, newLine, c.user, c.now)
		if !errors.Is(err, c.want) || !errors.Is(err, room.ErrPassRejected) {
			t.Errorf("%s: VerifyIn = %v, want %v (an ErrPassRejected)", c.name, err, c.want)
		}
	}
	if _, err := k.VerifyIn(tok, 42, room.Line{}, "alice", passNow); !errors.Is(err, room.ErrPassWrongLine) {
		t.Errorf("VerifyIn in the zero line = %v, want ErrPassWrongLine", err)
	}
}

func TestLineOf(t *testing.T) {
	t.Parallel()
	seed := room.NewSeed()
	l, err := room.LineOf(seed.Commitment())
	if err != nil {
		t.Fatalf("LineOf(a commitment): %v", err)
	}
	if want := seed.Commitment()[:16]; l.String() != want {
		t.Errorf("LineOf = %v, want the commitment's first 8 bytes %s", l, want)
	}
	if other, _ := room.LineOf(room.NewSeed().Commitment()); other == l {
		t.Errorf("two seeds' lines are both %v", l)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("0", 62), strings.Repeat("0", 66), strings.Repeat("g", 64)} {
		if _, err := room.LineOf(bad); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("LineOf(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPassIssueRefusesBadFields(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	for _, bad := range []room.Pass{
		{ItemID: 0, UserID: "a", Ticket: 1, Expiry: passNow},
		{ItemID: 1, UserID: "", Ticket: 1, Expiry: passNow},
		{ItemID: 1, UserID: "a b", Ticket: 1, Expiry: passNow},
		{ItemID: 1, UserID: strings.Repeat("u", 65), Ticket: 1, Expiry: passNow},
		{ItemID: 1, UserID: "a", Ticket: 0, Expiry: passNow},
		{ItemID: 1, UserID: "a", Ticket: 1, Expiry: time.Unix(-5, 0)},
	} {
		if _, err := k.Issue(bad); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("Issue(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPassExpiryRoundsDown(t *testing.T) {
	t.Parallel()
	k := testKey(t, 'k')
	p := samplePass
	p.Expiry = passNow.Add(1999 * time.Millisecond)
	got, err := k.Verify(issue(t, k, p), 42, "alice", passNow)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := passNow.Add(time.Second); !got.Expiry.Equal(want) {
		t.Errorf("expiry = %v, want %v (rounded down: never past the room's own expiry)", got.Expiry, want)
	}
}

func TestPassKeys(t *testing.T) {
	t.Parallel()
	if _, err := room.NewPassKey(make([]byte, room.MinPassKeyLen-1)); !errors.Is(err, room.ErrInvalid) {
		t.Errorf("NewPassKey(31 bytes) = %v, want ErrInvalid", err)
	}
	for _, s := range []string{"", "short", strings.Repeat("no key!", 10), strings.Repeat("ab", 15)} {
		if _, err := room.ParsePassKey(s); !errors.Is(err, room.ErrInvalid) {
			t.Errorf("ParsePassKey(%q) = %v, want ErrInvalid", s, err)
		}
	}
	raw := []byte(strings.Repeat("s", 32))
	want := issue(t, testKey(t, 's'), samplePass)
	for _, s := range []string{
		strings.Repeat("73", 32), // hex
		base64.StdEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw),
	} {
		k, err := room.ParsePassKey(s)
		if err != nil {
			t.Fatalf("ParsePassKey(%q): %v", s, err)
		}
		if got := issue(t, k, samplePass); got != want {
			t.Errorf("key parsed from %q signs differently", s)
		}
		if k.Generated() {
			t.Errorf("parsed key says Generated")
		}
	}
	g1, g2 := room.GeneratePassKey(), room.GeneratePassKey()
	if !g1.Generated() || g1.String() != "PassKey(generated)" {
		t.Errorf("generated key: Generated %v, String %q", g1.Generated(), g1.String())
	}
	if _, err := g2.Verify(issue(t, g1, samplePass), 42, "alice", passNow); !errors.Is(err, room.ErrPassForged) {
		t.Errorf("two generated keys agree: %v", err)
	}
	var zero room.PassKey
	if _, err := zero.Issue(samplePass); !errors.Is(err, room.ErrInvalid) {
		t.Errorf("zero key Issue = %v, want ErrInvalid", err)
	}
}

// TestMACsComparedInConstantTime reads the verifiers' source: a pass's and
// a challenge's signature must be compared with hmac.Equal, once, whose
// time does not depend on where the first differing byte is, so a forger
// cannot find a MAC byte by byte. No bytes or string equality may touch it.
func TestMACsComparedInConstantTime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, fn string }{{"pass.go", "Verify"}, {"pow.go", "VerifyPoW"}} {
		t.Run(c.fn, func(t *testing.T) { checkMACComparedInConstantTime(t, c.file, c.fn) })
	}
}

func checkMACComparedInConstantTime(t *testing.T, file, fn string) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var verify *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			verify = fd
		}
	}
	if verify == nil {
		t.Fatalf("no %s in %s", fn, file)
	}
	hmacEqual := 0
	ast.Inspect(verify, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				switch id.Name + "." + n.Sel.Name {
				case "hmac.Equal":
					hmacEqual++
				case "bytes.Equal", "bytes.Compare", "subtle.ConstantTimeCompare":
					t.Errorf("%s uses %s.%s; the MAC must be compared with hmac.Equal", fn, id.Name, n.Sel.Name)
				}
			}
		case *ast.BinaryExpr:
			for _, side := range []ast.Expr{n.X, n.Y} {
				if id, ok := side.(*ast.Ident); ok && id.Name == "sig" {
					t.Errorf("%s compares sig with %s", fn, n.Op)
				}
			}
		}
		return true
	})
	if hmacEqual != 1 {
		t.Errorf("%s calls hmac.Equal %d times, want 1", fn, hmacEqual)
	}
}

func BenchmarkPassVerify(b *testing.B) {
	k := testKey(b, 'k')
	tok := issue(b, k, samplePass)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Verify(tok, 42, "alice", passNow); err != nil {
			b.Fatal(err)
		}
	}
}
