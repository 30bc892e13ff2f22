package handler

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/stock"
)

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
