package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync/atomic"
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// RequestID is the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestIDs makes ids unique across processes (a random prefix) and cheap
// within one (a counter): one small allocation per request.
type requestIDs struct {
	prefix string
	next   atomic.Uint64
}

func newRequestIDs() *requestIDs {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

// id is the request's id: the one the client sent when it sent one valid
// id, a fresh one otherwise.
func (r *requestIDs) id(incoming []string) string {
	if len(incoming) == 1 && validRequestID(incoming[0]) {
		return incoming[0]
	}
	buf := make([]byte, 0, len(r.prefix)+13)
	buf = append(buf, r.prefix...)
	return string(strconv.AppendUint(buf, r.next.Add(1), 36))
}

// validRequestID accepts 1 to 64 characters of [A-Za-z0-9._:-], so a client
// cannot inject anything into logs or headers.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// WithRequestIDs wraps a slog.Handler so every record logged with a
// request's context carries its request_id.
func WithRequestIDs(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
