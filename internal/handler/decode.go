package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// decode reads a JSON body strictly: one object, known fields only, right
// types. On failure it has already answered (400 or 413) and returns false.
func (h *Handler) decode(c *gin.Context, dst any) bool { return h.decodeOptional(c, dst, false) }

// decodeOptional is decode that, with optional, accepts an empty body and
// leaves dst as it is.
func (h *Handler) decodeOptional(c *gin.Context, dst any, optional bool) bool {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			abort(c, http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
				fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		abort(c, http.StatusBadRequest, CodeInvalidRequest, "could not read the request body")
		return false
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if r, ok := dst.(*placeOrderRequest); ok && fastOrderBody(body, r) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		abort(c, http.StatusBadRequest, CodeInvalidRequest, jsonProblem(err))
		return false
	}
	if dec.More() {
		abort(c, http.StatusBadRequest, CodeInvalidRequest, "the body must hold exactly one JSON object")
		return false
	}
	return true
}

// jsonProblem says what was wrong with a body in words a client can act on.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty; a JSON object is required"
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return "the body must be a JSON object"
		}
		return fmt.Sprintf("%s must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	case strings.Contains(err.Error(), "parsing time"):
		return "times must be RFC 3339, e.g. 2026-11-22T10:00:00Z"
	}
	return "malformed JSON"
}

func jsonKind(kind string) string {
	switch kind {
	case "int64", "int", "int32":
		return "an integer in range"
	case "string":
		return "a string"
	case "ptr", "struct":
		return "an RFC 3339 time string"
	}
	return "of another type"
}

// pathID parses a positive integer path parameter.
func pathID(c *gin.Context) (int64, error) {
	raw := c.Param("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, stock.Invalidf("item id must be a positive integer, got %q", raw)
	}
	return id, nil
}

// fastOrderBody reads the body every order attempt sends,
// {"user_id":"..."} with nothing JSON would escape in the id, without the
// decoder: it runs tens of thousands of times a second. Any other body,
// including the same with spaces, goes to the strict decoder, which gives
// the same result for this one.
func fastOrderBody(body []byte, r *placeOrderRequest) bool {
	const pre, post = `{"user_id":"`, `"}`
	if len(body) < len(pre)+len(post) || string(body[:len(pre)]) != pre || string(body[len(body)-len(post):]) != post {
		return false
	}
	id := body[len(pre) : len(body)-len(post)]
	for _, c := range id {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	u := string(id)
	r.UserID = &u
	return true
}
