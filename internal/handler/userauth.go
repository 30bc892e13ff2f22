package handler

import (
	"errors"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
)

// errUnauthorized is a missing or invalid user token (JWT mode).
var errUnauthorized = errors.New("a valid user bearer token is required")

// tokenUser returns the user a request's HS256 bearer token names in its
// "sub". It requires an unexpired token signed with the configured secret.
func (h *Handler) tokenUser(c *gin.Context) (string, error) {
	raw, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return "", errUnauthorized
	}
	tok, err := h.jwt.Parse(raw, func(*jwt.Token) (any, error) { return h.cfg.UserJWTSecret, nil })
	if err != nil || !tok.Valid {
		return "", errUnauthorized
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil || sub == "" {
		return "", errUnauthorized
	}
	return sub, nil
}
