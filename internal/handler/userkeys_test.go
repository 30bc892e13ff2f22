package handler

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// idp is a fake identity provider on loopback: it serves a JWKS of the
// keys it holds, and can be told to serve garbage, fail, or stall.
type idp struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]crypto.Signer // kid -> private key, published
	algs map[string]jwt.SigningMethod
	mode string // "" serves the set; "garbage", "500", "stall"
	hits int
	stop chan struct{} // closed at cleanup: releases stalled answers
	// unstall, closed by release, ends the stalls in progress: they then
	// serve the set.
	unstall chan struct{}
}

func newIdP(t *testing.T) *idp {
	t.Helper()
	p := &idp{t: t, keys: map[string]crypto.Signer{}, algs: map[string]jwt.SigningMethod{}, stop: make(chan struct{}),
		unstall: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() { close(p.stop); p.srv.Close() })
	return p
}

func (p *idp) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hits++
	mode, unstall := p.mode, p.unstall
	p.mu.Unlock()
	if mode == "stall" {
		select {
		case <-r.Context().Done():
			return
		case <-p.stop:
			return
		case <-unstall:
			mode = ""
		}
	}
	p.mu.Lock()
	var doc jwkset.JWKSMarshal
	for kid, k := range p.keys {
		alg := jwkset.ALG(p.algs[kid].Alg())
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
		if err != nil {
			p.mu.Unlock()
			p.t.Errorf("idp: %v", err)
			return
		}
		doc.Keys = append(doc.Keys, jwk.Marshal())
	}
	p.mu.Unlock()
	switch mode {
	case "garbage":
		_, _ = io.WriteString(w, "<html>not a key set")
	case "500":
		http.Error(w, "down", http.StatusInternalServerError)
	default:
		_ = json.NewEncoder(w).Encode(doc)
	}
}

func (p *idp) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

// release ends the stalls in progress and serves the set from now on.
func (p *idp) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.unstall)
	p.unstall, p.mode = make(chan struct{}), ""
}

func (p *idp) publish(kid string, method jwt.SigningMethod, k crypto.Signer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid], p.algs[kid] = k, method
}

func (p *idp) unpublish(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, kid)
}

func (p *idp) hitCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// testKeys are made once: an RSA key takes a while under the race detector.
var testKeys = sync.OnceValue(func() (keys struct {
	rsa, rsa2 *rsa.PrivateKey
	ec        *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}) {
	var err error
	if keys.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if keys.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if keys.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if _, keys.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	return keys
})

const (
	testIssuer   = "https://idp.example/"
	testAudience = "seckill"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// idpToken signs claims (with the test issuer, audience and an hour's
// expiry unless claims say otherwise) under kid.
func idpToken(t *testing.T, now time.Time, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	full := jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "exp": now.Add(time.Hour).Unix(), "sub": "carol"}
	for k, v := range claims {
		if v == nil {
			delete(full, k)
		} else {
			full[k] = v
		}
	}
	tok := jwt.NewWithClaims(method, full)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keysHandler is a handler in JWKS mode against p, with clock and the
// reads' results sent to reads (when not nil).
func keysHandler(t *testing.T, p *idp, clock *fakeClock, shop *fakeShop, cfg UserKeysConfig) (*Handler, *UserKeys) {
	t.Helper()
	cfg.URL = p.srv.URL
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if clock != nil {
		cfg.Now = clock.Now
	}
	keys, err := NewUserKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keys.Close)
	// No request deadline to save a request that waits on the provider:
	// only the key set's own bound (Wait) may.
	hcfg := Config{UserKeys: keys, UserJWTIssuer: testIssuer, UserJWTAudience: testAudience, RequestTimeout: time.Hour}
	if clock != nil {
		hcfg.Now = clock.Now
	}
	return newTestHandler(t, shop, hcfg), keys
}

// readLog collects the key set's reads' outcomes.
func readLog(cfg *UserKeysConfig) <-chan error {
	reads := make(chan error, 1000)
	cfg.afterRead = func(err error) {
		select {
		case reads <- err:
		default: // a test that stopped listening
		}
	}
	return reads
}

// concurrently runs n orders with made-up kids at once and returns their
// answers.
func unknownKidFlood(t *testing.T, h *Handler, now time.Time, n int) []answer {
	t.Helper()
	k := testKeys()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = idpToken(t, now, jwt.SigningMethodRS256, k.rsa2, fmt.Sprintf("made-up-%d", i), nil)
	}
	out := make([]answer, n)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() { out[i] = order(h, toks[i]) })
	}
	wg.Wait()
	return out
}

// TestUserKeysRotation: a key the provider added is picked up when a token
// names it, without a restart; a key it removed is refused; reads caused
// by unknown kids come at most once per MinInterval, however many kids.
func TestUserKeysRotation(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("k1", jwt.SigningMethodRS256, k.rsa)
	shop, _ := sellingShop()
	clock := &fakeClock{now: time.Now()}
	h, _ := keysHandler(t, p, clock, shop, UserKeysConfig{})
	now := clock.Now()
	k1 := idpToken(t, now, jwt.SigningMethodRS256, k.rsa, "k1", nil)
	k2 := idpToken(t, now, jwt.SigningMethodRS256, k.rsa2, "k2", nil)
	if a := order(h, k1); a.status != 201 {
		t.Fatalf("k1: got %d %s, want 201", a.status, a.body)
	}
	p.publish("k2", jwt.SigningMethodRS256, k.rsa2)
	p.unpublish("k1")

	// Within MinInterval of the start's read, an unknown kid reads nothing.
	if a := order(h, k2); a.status != 401 || a.message() != string(errTokenUnknownKey) {
		t.Errorf("k2 within the interval: got %d %s, want 401 unknown key", a.status, a.body)
	}
	if n := p.hitCount(); n != 1 {
		t.Errorf("%d reads, want 1", n)
	}
	clock.Add(DefaultUserKeysMinInterval)
	if a := order(h, k2); a.status != 201 {
		t.Errorf("k2 after the provider published it: got %d %s, want 201", a.status, a.body)
	}
	if a := order(h, k1); a.status != 401 || a.message() != string(errTokenUnknownKey) {
		t.Errorf("k1 after the provider removed it: got %d %s, want 401 unknown key", a.status, a.body)
	}
	if n := p.hitCount(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}

	// A flood of made-up kids: none read within the interval, one after it.
	for _, want := range []int{2, 3} {
		for i, a := range unknownKidFlood(t, h, now, 50) {
			if a.status != 401 || a.message() != string(errTokenUnknownKey) {
				t.Fatalf("made-up kid %d: got %d %s, want 401 unknown key", i, a.status, a.body)
			}
		}
		if n := p.hitCount(); n != want {
			t.Errorf("after a flood of 50 made-up kids: %d reads, want %d", n, want)
		}
		clock.Add(DefaultUserKeysMinInterval)
	}
	if a := order(h, k2); a.status != 201 {
		t.Errorf("k2 after the floods: got %d %s, want 201", a.status, a.body)
	}
}

// TestUserKeysProviderDown: while the provider serves garbage, fails or
// stalls, tokens of the keys held still verify (also while a stalled read
// is in flight) and an unknown kid is refused once its wait ends; the set
// recovers when the provider does.
func TestUserKeysProviderDown(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("k1", jwt.SigningMethodRS256, k.rsa)
	shop, _ := sellingShop()
	clock := &fakeClock{now: time.Now()}
	cfg := UserKeysConfig{Wait: 50 * time.Millisecond}
	reads := readLog(&cfg)
	h, _ := keysHandler(t, p, clock, shop, cfg)
	if err := <-reads; err != nil {
		t.Fatalf("the first read: %v", err)
	}
	now := clock.Now()
	k1 := idpToken(t, now, jwt.SigningMethodRS256, k.rsa, "k1", nil)
	k2 := idpToken(t, now, jwt.SigningMethodRS256, k.rsa2, "k2", nil)
	p.publish("k2", jwt.SigningMethodRS256, k.rsa2) // what a working provider would serve

	for _, mode := range []string{"garbage", "500"} {
		p.set(mode)
		clock.Add(DefaultUserKeysMinInterval)
		if a := order(h, k2); a.status != 401 || a.message() != string(errTokenUnknownKey) {
			t.Errorf("%s: unknown kid: got %d %s, want 401 unknown key", mode, a.status, a.body)
		}
		if err := <-reads; err == nil {
			t.Errorf("%s: the read succeeded", mode)
		}
		if a := order(h, k1); a.status != 201 {
			t.Errorf("%s: the key held: got %d %s, want 201", mode, a.status, a.body)
		}
	}

	p.set("stall")
	clock.Add(DefaultUserKeysMinInterval)
	hits := p.hitCount()
	// The handler returns: the request waited Wait, not for the provider.
	if a := order(h, k2); a.status != 401 || a.message() != string(errTokenUnknownKey) {
		t.Errorf("stalled: unknown kid: got %d %s, want 401 unknown key", a.status, a.body)
	}
	if a := order(h, k1); a.status != 201 {
		t.Errorf("stalled, a read in flight: the key held: got %d %s, want 201", a.status, a.body)
	}
	clock.Add(DefaultUserKeysMinInterval)
	if a := order(h, k2); a.status != 401 { // joins the read in flight
		t.Errorf("stalled: a second unknown kid: got %d %s, want 401", a.status, a.body)
	}
	if n := p.hitCount() - hits; n != 1 {
		t.Errorf("stalled: %d reads, want 1 (the second unknown kid joins the one in flight)", n)
	}
	p.release()
	if err := <-reads; err != nil {
		t.Fatalf("the read after the stall: %v", err)
	}
	if a := order(h, k2); a.status != 201 {
		t.Errorf("recovered: k2: got %d %s, want 201", a.status, a.body)
	}
}

// TestUserKeysStartupProviderDown: the service starts when the provider is
// down (failing or stalled past FetchTimeout) with an empty set, refuses
// tokens as of unknown keys, and reads again until the provider answers.
func TestUserKeysStartupProviderDown(t *testing.T) {
	t.Parallel()
	k := testKeys()
	for _, mode := range []string{"500", "stall"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			p := newIdP(t)
			p.publish("k1", jwt.SigningMethodRS256, k.rsa)
			p.set(mode)
			shop, _ := sellingShop()
			// The stall ends the first read at FetchTimeout; later reads
			// are released by the test. The real clock: reads are retried
			// every MinInterval while they fail.
			cfg := UserKeysConfig{FetchTimeout: 100 * time.Millisecond, MinInterval: 20 * time.Millisecond, Wait: 20 * time.Millisecond}
			if mode == "500" {
				cfg.FetchTimeout = 0 // the default: a failure is at once
			}
			reads := readLog(&cfg)
			h, _ := keysHandler(t, p, nil, shop, cfg) // returns: the start does not hang
			if err := <-reads; err == nil {
				t.Fatal("the first read succeeded")
			}
			k1 := idpToken(t, time.Now(), jwt.SigningMethodRS256, k.rsa, "k1", nil)
			p.release()
			for err := range reads {
				if err == nil {
					break
				}
			}
			if a := order(h, k1); a.status != 201 {
				t.Errorf("once the provider answers: got %d %s, want 201", a.status, a.body)
			}
		})
	}
}

// TestUserKeysRefreshTimer: the set is read again every Refresh, so a key
// published ahead of its use verifies with no read caused by a token.
func TestUserKeysRefreshTimer(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("k1", jwt.SigningMethodRS256, k.rsa)
	shop, _ := sellingShop()
	clock := &fakeClock{now: time.Now()} // frozen: tokens cause no read
	cfg := UserKeysConfig{Refresh: 20 * time.Millisecond}
	reads := readLog(&cfg)
	h, _ := keysHandler(t, p, clock, shop, cfg)
	<-reads
	p.publish("k2", jwt.SigningMethodRS256, k.rsa2)
	// Two reads after the publication: the second began after it.
	for ok := 0; ok < 2; {
		if err := <-reads; err == nil {
			ok++
		}
	}
	if a := order(h, idpToken(t, clock.Now(), jwt.SigningMethodRS256, k.rsa2, "k2", nil)); a.status != 201 {
		t.Errorf("k2 after timed reads: got %d %s, want 201", a.status, a.body)
	}
}

// TestUserKeysDocumentKeys: a symmetric key in the document is never
// taken (a set of only such keys is a failed read), and a key published
// for encryption never verifies a token.
func TestUserKeysDocumentKeys(t *testing.T) {
	t.Parallel()
	k := testKeys()
	enc, err := jwkset.NewJWKFromKey(k.ec.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "enc", USE: jwkset.UseEnc}})
	if err != nil {
		t.Fatal(err)
	}
	encJSON, err := json.Marshal(enc.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	oct := `{"kty":"oct","kid":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}`
	var mu sync.Mutex
	doc := `{"keys":[` + oct + `]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(w, doc)
	}))
	t.Cleanup(srv.Close)
	clock := &fakeClock{now: time.Now()}
	cfg := UserKeysConfig{URL: srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now}
	reads := readLog(&cfg)
	keys, err := NewUserKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keys.Close)
	if err := <-reads; err == nil || !strings.Contains(err.Error(), "no usable key") {
		t.Errorf("a set of one symmetric key: read error %v, want no usable key", err)
	}
	mu.Lock()
	doc = `{"keys":[` + oct + `,` + string(encJSON) + `]}`
	mu.Unlock()
	clock.Add(DefaultUserKeysMinInterval) // the unknown kid may read the set again
	h := newTestHandler(t, &fakeShop{}, Config{UserKeys: keys, UserJWTIssuer: testIssuer, UserJWTAudience: testAudience, Now: clock.Now})
	if a := order(h, idpToken(t, clock.Now(), jwt.SigningMethodES256, k.ec, "enc", nil)); a.status != 401 || a.message() != string(errTokenKeyMismatch) {
		t.Errorf("a token of the encryption key: got %d %s, want 401 %q", a.status, a.body, errTokenKeyMismatch)
	}
	if err := <-reads; err != nil {
		t.Errorf("the read the unknown kid caused: %v", err)
	}
}
