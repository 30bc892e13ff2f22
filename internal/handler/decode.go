package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// decode reads a JSON body strictly: one object, known fields only, right
// types. On failure it has already answered (400 or 413) and returns false.
func (h *Handler) decode(c *gin.Context, dst any) bool { return h.decodeOptional(c, dst, false) }

// decodeOptional is decode that, with optional, accepts an empty body and
// leaves dst as it is.
func (h *Handler) decodeOptional(c *gin.Context, dst any, optional bool) bool {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer putBodyBuffer(buf)
	buf.Reset()
	_, err := buf.ReadFrom(c.Request.Body)
	body := buf.Bytes() // nothing below keeps it: decoding copies what it keeps
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
	switch r := dst.(type) {
	case *placeOrderRequest:
		if u, ok := fastUserIDBody(body); ok {
			r.UserID = u
			return true
		}
	case *joinRequest:
		if u, ok := fastUserIDBody(body); ok {
			r.UserID = u
			return true
		}
	}
	if err := decodeStrict(body, dst); err != nil {
		abort(c, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return false
	}
	return true
}

// bodyBuffers holds the buffers request bodies are read into, so reading
// the body of an order attempt allocates nothing in the steady state.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBodyBuffer returns buf to the pool unless a large body grew it.
func putBodyBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 16<<10 {
		bodyBuffers.Put(buf)
	}
}

// decodeStrict decodes one JSON object into dst, a pointer to a struct:
// known fields only, spelled exactly as their json tags (encoding/json
// would match "USER_ID" to user_id), each at most once (encoding/json would
// keep the last), right types, and nothing after the object. Its error's
// text is fit for the client.
func decodeStrict(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errors.New(jsonProblem(err))
	}
	if dec.More() {
		return errors.New("the body must hold exactly one JSON object")
	}
	return checkMemberNames(body, reflect.TypeOf(dst))
}

// checkMemberNames walks a valid JSON document's tokens and refuses a
// member name that appears twice in one object, at any depth, and a name
// that is not exactly one of its struct's json names, in the top object and
// in every object the struct types describe (a nested struct, or one in a
// slice): encoding/json matches those without case at every depth. Objects
// decoded into a map or an interface are free-form.
func checkMemberNames(body []byte, top reflect.Type) error {
	type level struct {
		object  bool
		seen    map[string]bool
		fields  map[string]reflect.Type // nil: any name
		wantKey bool
		next    reflect.Type // the type of the value that comes next (nil: free-form)
	}
	var stack []*level
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
			stack[n-1].next = nil
		}
	}
	next := top // the type of the document's value
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errors.New("malformed JSON")
		}
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.object && top.wantKey {
				if name, ok := tok.(string); ok {
					ft, known := top.fields[name]
					switch {
					case top.seen[name]:
						return fmt.Errorf("field %q appears more than once", name)
					case top.fields != nil && !known:
						return fmt.Errorf("unknown field %q (field names are case-sensitive)", name)
					}
					top.seen[name] = true
					top.wantKey = false
					top.next = ft
					continue
				}
			}
			next = stack[n-1].next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, seen: map[string]bool{}, fields: structFields(next), wantKey: true})
		case json.Delim('['):
			var elem reflect.Type
			if t := deref(next); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			stack = append(stack, &level{next: elem})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// deref is t without its pointers (nil for nil).
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// structFields is the json names and types of the struct t (through
// pointers) decodes an object into; nil when t is not such a struct.
func structFields(t reflect.Type) map[string]reflect.Type {
	t = deref(t)
	if t == nil || t.Kind() != reflect.Struct || t == timeType {
		return nil
	}
	return jsonNames(t)
}

var timeType = reflect.TypeFor[time.Time]()

// jsonNames lists the member names encoding/json uses for struct type t,
// with their types.
func jsonNames(t reflect.Type) map[string]reflect.Type {
	names := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = f.Type
	}
	return names
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
		return fmt.Sprintf("%s must be %s", typeErr.Field, jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	case strings.Contains(err.Error(), "parsing time"), strings.Contains(err.Error(), "Time.UnmarshalJSON"):
		return "times must be RFC 3339, e.g. 2026-11-22T10:00:00Z"
	}
	return "malformed JSON"
}

// jsonKind names the JSON a Go type t takes, for an error message.
func jsonKind(t reflect.Type) string {
	t = deref(t)
	switch {
	case t == timeType:
		return "an RFC 3339 time string"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "a JSON object"
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		return "a JSON array"
	case t.Kind() == reflect.Bool:
		return "true or false"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "of another type"
}

// fastUserIDBody reads the body every order attempt and every join sends,
// {"user_id":"..."} with nothing JSON would escape in the id, without the
// decoder: it runs tens of thousands of times a second. Any other body,
// including the same with spaces, goes to the strict decoder, which gives
// the same result for this one.
func fastUserIDBody(body []byte) (*string, bool) {
	const pre, post = `{"user_id":"`, `"}`
	if len(body) < len(pre)+len(post) || string(body[:len(pre)]) != pre || string(body[len(body)-len(post):]) != post {
		return nil, false
	}
	id := body[len(pre) : len(body)-len(post)]
	for _, c := range id {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	u := string(id)
	return &u, true
}
