package handler

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendOrderJSON renders an order as encoding/json renders orderJSON,
// without reflection: the order path answers tens of thousands of times a
// second. It returns false, having appended nothing, when a string holds a
// character JSON would escape (ids, statuses and codes never do; user ids
// are validated to [A-Za-z0-9._:@-]), and the caller falls back to
// encoding/json.
func appendOrderJSON(b []byte, v orderJSON) ([]byte, bool) {
	for _, s := range []string{v.ID, v.UserID, v.Status, v.Reason} {
		if !plainJSON(s) {
			return b, false
		}
	}
	b = append(b, `{"id":"`...)
	b = append(b, v.ID...)
	b = append(b, `","item_id":`...)
	b = strconv.AppendInt(b, v.ItemID, 10)
	b = append(b, `,"user_id":"`...)
	b = append(b, v.UserID...)
	b = append(b, `","status":"`...)
	b = append(b, v.Status...)
	b = append(b, '"')
	if v.Reason != "" {
		b = append(b, `,"reason":"`...)
		b = append(b, v.Reason...)
		b = append(b, '"')
	}
	b = append(b, `,"expires_at":`...)
	if v.ExpiresAt == nil {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, *v.ExpiresAt)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, v.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, v.UpdatedAt)
	return append(b, '}'), true
}

// appendTime renders t as time.Time's MarshalJSON does.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// plainJSON reports whether s needs no escaping in a JSON string, as
// encoding/json escapes (it also escapes <, > and &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// marshalOrder is appendOrderJSON with the encoding/json fallback.
func marshalOrder(v orderJSON) []byte {
	if b, ok := appendOrderJSON(make([]byte, 0, 256), v); ok {
		return b
	}
	b, _ := json.Marshal(v) // orderJSON always marshals
	return b
}
