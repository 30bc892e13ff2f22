package handler

import (
	"encoding/json"
	"strconv"

	"github.com/seckill/seckill/internal/rooms"
)

// appendTicketJSON renders a waiting-room ticket as encoding/json renders
// rooms.Ticket, without reflection: joins and status polls are the room's
// hot paths. It returns false, having appended nothing, when a string
// holds a character JSON would escape (ticket strings and passes are
// base64url, states plain words), and the caller falls back to
// encoding/json.
func appendTicketJSON(b []byte, t *rooms.Ticket) ([]byte, bool) {
	if !plainJSON(t.Ticket) || !plainJSON(string(t.State)) || !plainJSON(t.Pass) || !plainJSON(t.Commitment) {
		return b, false
	}
	b = append(b, `{"ticket":"`...)
	b = append(b, t.Ticket...)
	b = append(b, `","number":`...)
	b = strconv.AppendInt(b, t.Number, 10)
	b = append(b, `,"state":"`...)
	b = append(b, t.State...)
	b = append(b, `","drawn":`...)
	b = strconv.AppendBool(b, t.Drawn)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, t.Position, 10)
	b = append(b, `,"ahead":`...)
	b = strconv.AppendInt(b, t.Ahead, 10)
	b = append(b, `,"eta_seconds":`...)
	b = strconv.AppendInt(b, t.ETASeconds, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, t.Remaining, 10)
	if t.Pass != "" {
		b = append(b, `,"pass":"`...)
		b = append(b, t.Pass...)
		b = append(b, '"')
	}
	if t.PassExpiresAt != nil {
		b = append(b, `,"pass_expires_at":`...)
		b = appendTime(b, *t.PassExpiresAt)
	}
	b = append(b, `,"opens_at":`...)
	if t.OpensAt == nil {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, *t.OpensAt)
	}
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, t.PollAfterMS, 10)
	if t.Commitment != "" {
		b = append(b, `,"commitment":"`...)
		b = append(b, t.Commitment...)
		b = append(b, '"')
	}
	return append(b, '}'), true
}

// marshalTicket is appendTicketJSON with the encoding/json fallback.
func marshalTicket(t *rooms.Ticket) []byte {
	if b, ok := appendTicketJSON(make([]byte, 0, 320), t); ok {
		return b
	}
	b, _ := json.Marshal(t) // a Ticket always marshals
	return b
}
