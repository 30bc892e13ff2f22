package handler

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
)

// errUnauthorized is a missing or invalid user token (token mode). Every
// refusal of a token is one, each with a message saying what was wrong.
var errUnauthorized = errors.New("a valid user bearer token is required")

// tokenRefusal is a refused user token: errUnauthorized with its reason.
type tokenRefusal string

func (e tokenRefusal) Error() string        { return string(e) }
func (e tokenRefusal) Is(target error) bool { return target == errUnauthorized }

// The reasons a token is refused, each its own 401 message.
const (
	errTokenMalformed   tokenRefusal = "the user token is malformed"
	errTokenAlg         tokenRefusal = "the user token's signing algorithm is not allowed"
	errTokenKeyMismatch tokenRefusal = "the user token's key (kid) is not for it: of another algorithm, or not a signing key"
	errTokenUnknownKey  tokenRefusal = "the user token is signed with a key (kid) the identity provider's key set does not hold"
	errTokenSignature   tokenRefusal = "the user token's signature does not verify"
	errTokenIssuer      tokenRefusal = "the user token is from another issuer (iss)"
	errTokenAudience    tokenRefusal = "the user token is for another audience (aud)"
	errTokenExpired     tokenRefusal = "the user token has expired"
	errTokenNotYet      tokenRefusal = "the user token is not valid yet (nbf)"
	errTokenNoExpiry    tokenRefusal = "the user token has no expiry (exp)"
	errTokenNoSubject   tokenRefusal = "the user token names no user (sub)"
	errTokenNoIssuer    tokenRefusal = "the user token names no issuer (iss)"
	errTokenNoAudience  tokenRefusal = "the user token names no audience (aud)"
	errTokenInvalid     tokenRefusal = "the user token is invalid"
)

// jwksMethods are the algorithms of identity providers' tokens. HS256 is
// never among them: with a public key set, an HMAC "signature" keyed with a
// public key would be anyone's to make.
var jwksMethods = []string{"RS256", "ES256", "EdDSA"}

// tokenLeeway is the clock skew allowed between the identity provider
// and this service on exp and nbf.
const tokenLeeway = 30 * time.Second

// tokenMode reports whether users are the bearer tokens' (an HS256 secret
// or an identity provider's key set is configured) rather than the
// request's user_id: every route that names a user asks this.
func (h *Handler) tokenMode() bool { return h.cfg.UserJWTSecret != nil || h.cfg.UserKeys != nil }

// newTokenParser is the parser of user tokens of the configured mode.
func newTokenParser(cfg Config) *jwt.Parser {
	opts := []jwt.ParserOption{jwt.WithExpirationRequired()}
	if cfg.UserKeys != nil {
		opts = append(opts, jwt.WithValidMethods(jwksMethods), jwt.WithLeeway(tokenLeeway))
	} else {
		opts = append(opts, jwt.WithValidMethods([]string{"HS256"}))
	}
	if cfg.UserJWTIssuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.UserJWTIssuer))
	}
	if cfg.UserJWTAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.UserJWTAudience))
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	return jwt.NewParser(opts...)
}

// tokenUser returns the user a request's bearer token names in its "sub":
// an unexpired token signed with the configured secret (HS256) or with a
// key of the identity provider's set (RS256, ES256, EdDSA), in one
// Authorization header (two are an ErrInvalid).
func (h *Handler) tokenUser(c *gin.Context) (string, error) {
	header, err := singleHeader(c, "Authorization")
	if err != nil {
		return "", err
	}
	raw, ok := bearerToken(header)
	if !ok {
		return "", errUnauthorized
	}
	key := func(*jwt.Token) (any, error) { return h.cfg.UserJWTSecret, nil }
	if h.cfg.UserKeys != nil {
		key = h.cfg.UserKeys.keyfunc(c.Request.Context())
	}
	tok, err := h.jwt.Parse(raw, key)
	if err != nil || !tok.Valid {
		return "", refusal(tok, err, h.cfg)
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil || sub == "" {
		return "", errTokenNoSubject
	}
	return sub, nil
}

// refusal says why the parser refused a token, the first reason that
// applies: the key and signature before the claims, whose checks are
// only meaningful on a verified token.
func refusal(tok *jwt.Token, err error, cfg Config) error {
	allowed := []string{"HS256"}
	if cfg.UserKeys != nil {
		allowed = jwksMethods
	}
	switch {
	case err == nil:
		return errTokenInvalid
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errTokenMalformed
	case tok != nil && (tok.Method == nil || !slices.Contains(allowed, tok.Method.Alg())):
		return errTokenAlg // none, HS256 against a key set, an unknown alg
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return errTokenUnknownKey
	case errors.Is(err, jwt.ErrInvalidKeyType), errors.Is(err, keyfunc.ErrKeyfunc):
		return errTokenKeyMismatch // e.g. ES256 named with an RSA key's kid
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return errTokenSignature
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errTokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errTokenAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// The parser requires exp always, iss and aud when configured.
		claims, _ := tok.Claims.(jwt.MapClaims)
		switch {
		case cfg.UserJWTIssuer != "" && claims["iss"] == nil:
			return errTokenNoIssuer
		case cfg.UserJWTAudience != "" && claims["aud"] == nil:
			return errTokenNoAudience
		}
		return errTokenNoExpiry
	case errors.Is(err, jwt.ErrTokenExpired):
		return errTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errTokenNotYet
	}
	return errTokenInvalid
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
