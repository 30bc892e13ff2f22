package handler

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
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

	"github.com/seckill/seckill/internal/stock"
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

// sellingShop sells to whoever asks and records the users.
func sellingShop() (*fakeShop, func() []string) {
	var mu sync.Mutex
	var users []string
	shop := &fakeShop{placeOrder: func(_ context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		users = append(users, req.UserID)
		return pendingOrder(req, stock.StatusCreated), false, nil
	}}
	return shop, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), users...) }
}

func order(h *Handler, token string) answer {
	return call(h, "POST", "/api/v1/items/3/orders", `{"user_id":"mallory"}`, map[string]string{"Authorization": "Bearer " + token})
}

// errMessage is an error answer's message.
func (a answer) message() string {
	var e errorBody
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Message
}

// TestUserKeysAlgorithms: RS256, ES256 and EdDSA tokens of the provider's
// keys are accepted, and the order's user is the token's sub.
func TestUserKeysAlgorithms(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("rsa", jwt.SigningMethodRS256, k.rsa)
	p.publish("ec", jwt.SigningMethodES256, k.ec)
	p.publish("ed", jwt.SigningMethodEdDSA, k.ed)
	shop, users := sellingShop()
	clock := &fakeClock{now: time.Now()}
	h, _ := keysHandler(t, p, clock, shop, UserKeysConfig{})
	for i, tc := range []struct {
		kid    string
		method jwt.SigningMethod
		key    any
	}{{"rsa", jwt.SigningMethodRS256, k.rsa}, {"ec", jwt.SigningMethodES256, k.ec}, {"ed", jwt.SigningMethodEdDSA, k.ed}} {
		sub := fmt.Sprintf("user-%d", i)
		a := order(h, idpToken(t, clock.Now(), tc.method, tc.key, tc.kid, jwt.MapClaims{"sub": sub}))
		if a.status != 201 {
			t.Errorf("%s: got %d %s, want 201", tc.method.Alg(), a.status, a.body)
		}
	}
	// A token without a kid is tried against the keys of its algorithm.
	if a := order(h, idpToken(t, clock.Now(), jwt.SigningMethodES256, k.ec, "", jwt.MapClaims{"sub": "user-3"})); a.status != 201 {
		t.Errorf("ES256 without a kid: got %d %s, want 201", a.status, a.body)
	}
	if a := order(h, idpToken(t, clock.Now(), jwt.SigningMethodES256, must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)), "", nil)); a.status != 401 ||
		a.message() != string(errTokenSignature) {
		t.Errorf("ES256 without a kid, of no key of the set: got %d %s, want 401 bad signature", a.status, a.body)
	}
	if got := users(); len(got) != 4 || got[0] != "user-0" || got[1] != "user-1" || got[2] != "user-2" || got[3] != "user-3" {
		t.Errorf("the shop sold to %v, want the tokens' subjects", got)
	}
	if p.hitCount() != 1 {
		t.Errorf("the key set was read %d times, want once (known keys need no read)", p.hitCount())
	}
}

// TestUserKeysRefusals: every way a token is wrong is a 401 with its own
// message, and none reaches the shop.
func TestUserKeysRefusals(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("rsa", jwt.SigningMethodRS256, k.rsa)
	p.publish("ec", jwt.SigningMethodES256, k.ec)
	clock := &fakeClock{now: time.Now()}
	shop := &fakeShop{} // no order reaches it: it fails the test if one does
	h, _ := keysHandler(t, p, clock, shop, UserKeysConfig{})
	now := clock.Now()
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&k.rsa.PublicKey))})
	rs := func(claims jwt.MapClaims) string {
		return idpToken(t, now, jwt.SigningMethodRS256, k.rsa, "rsa", claims)
	}
	for _, tc := range []struct {
		name, token string
		want        tokenRefusal
	}{
		{"expired", rs(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}), errTokenExpired},
		{"not yet valid", rs(jwt.MapClaims{"nbf": now.Add(time.Minute).Unix()}), errTokenNotYet},
		{"wrong issuer", rs(jwt.MapClaims{"iss": "https://evil.example/"}), errTokenIssuer},
		{"no issuer", rs(jwt.MapClaims{"iss": nil}), errTokenNoIssuer},
		{"wrong audience", rs(jwt.MapClaims{"aud": "another-app"}), errTokenAudience},
		{"no audience", rs(jwt.MapClaims{"aud": nil}), errTokenNoAudience},
		{"no expiry", rs(jwt.MapClaims{"exp": nil}), errTokenNoExpiry},
		{"no subject", rs(jwt.MapClaims{"sub": nil}), errTokenNoSubject},
		{"unknown key", idpToken(t, now, jwt.SigningMethodRS256, k.rsa2, "rsa-next", nil), errTokenUnknownKey},
		{"bad signature", idpToken(t, now, jwt.SigningMethodRS256, k.rsa2, "rsa", nil), errTokenSignature},
		{"alg none", idpToken(t, now, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa", nil), errTokenAlg},
		{"HS256 keyed with the public key", idpToken(t, now, jwt.SigningMethodHS256, pubPEM, "rsa", nil), errTokenAlg},
		{"RS512", idpToken(t, now, jwt.SigningMethodRS512, k.rsa, "rsa", nil), errTokenAlg},
		{"ES256 under the RSA key's kid", idpToken(t, now, jwt.SigningMethodES256, k.ec, "rsa", nil), errTokenKeyMismatch},
		{"malformed", "not.a.token", errTokenMalformed},
	} {
		a := order(h, tc.token)
		if a.status != 401 || a.code() != CodeUnauthorized || a.message() != string(tc.want) || a.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: got %d %s, want 401 %q", tc.name, a.status, a.body, tc.want)
		}
	}
	// Clocks drift: a token expired or starting within the leeway passes.
	for _, claims := range []jwt.MapClaims{{"exp": now.Add(-tokenLeeway / 2).Unix()}, {"nbf": now.Add(tokenLeeway / 2).Unix()}} {
		shop.placeOrder = func(_ context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
			return pendingOrder(req, stock.StatusCreated), false, nil
		}
		if a := order(h, rs(claims)); a.status != 201 {
			t.Errorf("%v, within the leeway: got %d %s, want 201", claims, a.status, a.body)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
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

// TestUserKeysRoutes: every route that names a user takes it from the
// provider's token: orders, an order's read, pay and cancel, and joining a
// waiting room; without a token each is 401.
func TestUserKeysRoutes(t *testing.T) {
	t.Parallel()
	k := testKeys()
	p := newIdP(t)
	p.publish("ec", jwt.SigningMethodES256, k.ec)
	shop := answeringShop()
	var settled []string
	shop.cancelOrder = func(_ context.Context, id, user string) (*stock.Order, error) {
		settled = append(settled, user)
		return pendingOrder(stock.OrderRequest{ItemID: 1, UserID: user}, stock.StatusCancelled), nil
	}
	rs := &joinCountingRooms{roomed: map[int64]bool{1: true}}
	keys, err := NewUserKeys(UserKeysConfig{URL: p.srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keys.Close)
	h := newTestHandler(t, shop, Config{UserKeys: keys, UserJWTIssuer: testIssuer, UserJWTAudience: testAudience, Rooms: rs})
	alice := map[string]string{"Authorization": "Bearer " + idpToken(t, time.Now(), jwt.SigningMethodES256, k.ec, "ec", jwt.MapClaims{"sub": "alice"})}
	bob := map[string]string{"Authorization": "Bearer " + idpToken(t, time.Now(), jwt.SigningMethodES256, k.ec, "ec", jwt.MapClaims{"sub": "bob"})}
	const orderPath = "/api/v1/orders/0190a0c2-0000-7000-8000-000000000001"
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/v1/items/1/queue", `{"user_id":"mallory"}`},
		{"GET", orderPath, ""},
		{"POST", orderPath + "/cancel", `{"user_id":"mallory"}`},
	} {
		if a := call(h, tc.method, tc.path, tc.body, nil); a.status != 401 {
			t.Errorf("%s %s without a token: got %d %s, want 401", tc.method, tc.path, a.status, a.body)
		}
		if a := call(h, tc.method, tc.path, tc.body, alice); a.status != 200 {
			t.Errorf("%s %s with alice's token: got %d %s, want 200", tc.method, tc.path, a.status, a.body)
		}
	}
	if a := call(h, "GET", orderPath, "", bob); a.status != 404 {
		t.Errorf("bob reading alice's order: got %d %s, want 404", a.status, a.body)
	}
	if len(rs.joins) != 1 || rs.joins[0] != "alice" || len(settled) != 1 || settled[0] != "alice" {
		t.Errorf("joined %v and cancelled for %v, want alice (the token's user) each", rs.joins, settled)
	}
}

// TestUserTokenMessagesHS256: the secret's tokens are refused with the
// same messages, iss and aud checked only when configured.
func TestUserTokenMessagesHS256(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	now := time.Now()
	plain := newTestHandler(t, &fakeShop{}, Config{UserJWTSecret: secret})
	checked := newTestHandler(t, &fakeShop{}, Config{UserJWTSecret: secret, UserJWTIssuer: testIssuer, UserJWTAudience: testAudience})
	hs := func(claims jwt.MapClaims) string { return idpToken(t, now, jwt.SigningMethodHS256, secret, "", claims) }
	for _, tc := range []struct {
		name  string
		h     *Handler
		token string
		want  tokenRefusal
	}{
		{"no expiry, no issuer asked", plain, hs(jwt.MapClaims{"exp": nil, "iss": nil, "aud": nil}), errTokenNoExpiry},
		{"expired", plain, hs(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}), errTokenExpired},
		{"another secret", plain, idpToken(t, now, jwt.SigningMethodHS256, []byte(strings.Repeat("t", 32)), "", nil), errTokenSignature},
		{"RS256 against the secret", plain, idpToken(t, now, jwt.SigningMethodRS256, testKeys().rsa, "", nil), errTokenAlg},
		{"no issuer", checked, hs(jwt.MapClaims{"iss": nil}), errTokenNoIssuer},
		{"another audience", checked, hs(jwt.MapClaims{"aud": "another-app"}), errTokenAudience},
	} {
		if a := order(tc.h, tc.token); a.status != 401 || a.message() != string(tc.want) {
			t.Errorf("%s: got %d %s, want 401 %q", tc.name, a.status, a.body, tc.want)
		}
	}
}
