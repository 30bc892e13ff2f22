package app_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The Authorization scheme is case-insensitive (RFC 9110 section 11.1):
// "bearer" and "BEARER" are "Bearer", for the admin token and user tokens.
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	_, c := apptest.Start(t, testenv.Embedded(t), func(cfg *app.Config) { cfg.UserJWTSecret = jwtSecret })
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		r := c.Must(t, "POST", "/api/v1/admin/items", `{"name":"x","stock":5}`, false,
			map[string]string{"Authorization": scheme + " " + apptest.Token})
		if r.Status != http.StatusCreated {
			t.Fatalf("create item with scheme %q: got %d %s, want 201", scheme, r.Status, r.Body)
		}
		var it apptest.Item
		r.JSON(t, &it)
		user := "user-" + scheme
		tok := strings.TrimPrefix(token(t, jwt.SigningMethodHS256, jwtSecret,
			jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}), "Bearer ")
		r = c.Must(t, "POST", "/api/v1/items/"+strconv.FormatInt(it.ID, 10)+"/orders", "{}", false,
			map[string]string{"Authorization": scheme + " " + tok})
		var o apptest.Order
		if r.Status == http.StatusCreated {
			r.JSON(t, &o)
		}
		if r.Status != http.StatusCreated || o.UserID != user {
			t.Errorf("order with scheme %q: got %d %s, want 201 for %s", scheme, r.Status, r.Body, user)
		}
	}
}
