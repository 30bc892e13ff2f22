package app_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

const (
	idpIssuer   = "https://idp.example/"
	idpAudience = "seckill-test"
)

// fakeIdP serves a JWKS of keys on loopback.
func fakeIdP(t *testing.T, keys map[string]crypto.Signer) string {
	t.Helper()
	var doc jwkset.JWKSMarshal
	for kid, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		doc.Keys = append(doc.Keys, jwk.Marshal())
	}
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/jwks.json"
}

func idpAuth(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) map[string]string {
	t.Helper()
	full := jwt.MapClaims{"iss": idpIssuer, "aud": idpAudience, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		full[k] = v
	}
	tok := jwt.NewWithClaims(method, full)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + s}
}

func withIdP(url string) func(*app.Config) {
	return func(cfg *app.Config) {
		cfg.UserJWKSURL, cfg.UserJWTIssuer, cfg.UserJWTAudience = url, idpIssuer, idpAudience
	}
}

// TestUserTokensFromIdentityProvider: with SECKILL_USER_JWKS_URL, orders
// and waiting-room joins take the user from the provider's tokens (ES256,
// EdDSA here); a verified account holds one place however often it joins;
// a token for another audience, or none, is 401.
func TestUserTokensFromIdentityProvider(t *testing.T) {
	t.Parallel()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	url := fakeIdP(t, map[string]crypto.Signer{"ec": ec, "ed": ed})
	c := startRoomApp(t, testenv.Embedded(t), withIdP(url))

	it := c.CreateItem(t, 5, "lua")
	path := "/api/v1/items/" + strconv.FormatInt(it.ID, 10) + "/orders"
	r := c.Must(t, "POST", path, map[string]any{"user_id": "mallory"}, false,
		idpAuth(t, jwt.SigningMethodES256, ec, "ec", jwt.MapClaims{"sub": "alice"}))
	var o apptest.Order
	if r.Status == http.StatusCreated {
		r.JSON(t, &o)
	}
	if r.Status != http.StatusCreated || o.UserID != "alice" {
		t.Fatalf("order with alice's ES256 token: got %d %s, want 201 for alice", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name string
		auth map[string]string
	}{
		{"no token", nil},
		{"another audience", idpAuth(t, jwt.SigningMethodES256, ec, "ec", jwt.MapClaims{"sub": "bob", "aud": "another-app"})},
	} {
		r := c.Must(t, "POST", path, "{}", false, tc.auth)
		if r.Status != http.StatusUnauthorized || r.ErrorCode() != "unauthorized" {
			t.Errorf("%s: got %d %s, want 401 unauthorized", tc.name, r.Status, r.Body)
		}
	}

	id := createRoomItem(t, c, 1, map[string]any{"admit_per_second": 100})
	var first roomTicket
	for i := range 3 { // each join a fresh token of the same account
		auth := idpAuth(t, jwt.SigningMethodEdDSA, ed, "ed", jwt.MapClaims{"sub": "carol", "iat": time.Now().Unix() + int64(i)})
		r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "sybil-" + strconv.Itoa(i)}, false, auth)
		if r.Status != http.StatusOK {
			t.Fatalf("join %d with carol's EdDSA token: got %d %s, want 200", i, r.Status, r.Body)
		}
		var tk roomTicket
		r.JSON(t, &tk)
		if i == 0 {
			first = tk
		} else if tk.Number != first.Number {
			t.Errorf("join %d: ticket %d, want carol's one place %d", i, tk.Number, first.Number)
		}
	}
	if r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "dave"}, false, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("join without a token: got %d %s, want 401", r.Status, r.Body)
	}
}

// TestUserJWKSProviderDownAtStart: a provider that refuses connections at
// the start does not stop the service: it starts, and a token is refused
// as of a key it does not hold.
func TestUserJWKSProviderDownAtStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/jwks.json"
	_ = l.Close() // nothing listens there now
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, c := apptest.Start(t, testenv.Embedded(t), withIdP(url))
	it := c.CreateItem(t, 5, "lua")
	r := c.Must(t, "POST", "/api/v1/items/"+strconv.FormatInt(it.ID, 10)+"/orders", "{}", false,
		idpAuth(t, jwt.SigningMethodES256, ec, "ec", jwt.MapClaims{"sub": "alice"}))
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if r.Status == http.StatusUnauthorized {
		r.JSON(t, &e)
	}
	if r.Status != http.StatusUnauthorized || e.Error.Message == "" || !strings.Contains(e.Error.Message, "kid") {
		t.Errorf("a token while the provider is down: got %d %s, want 401 naming the unknown key", r.Status, r.Body)
	}
}
