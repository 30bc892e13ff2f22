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
// "sub". It requires an unexpired token signed with the configured secret,
// in one Authorization header (two are an ErrInvalid).
func (h *Handler) tokenUser(c *gin.Context) (string, error) {
	header, err := singleHeader(c, "Authorization")
	if err != nil {
		return "", err
	}
	raw, ok := bearerToken(header)
	if !ok {
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

// bearerToken reads the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 9110 section 11.1) and followed by one
// or more spaces; the token is one token68 (RFC 6750 section 2.1): not
// empty, with no space inside.
func bearerToken(header string) (string, bool) {
	scheme, rest, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}
