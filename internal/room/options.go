package room

import (
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/stock/gate"
)

// Options configure a Room. A nil *Options means all defaults.
type Options struct {
	// KeyPrefix starts every Redis key, as gate.Keys's prefix does (same
	// rules: no braces or spaces). Default gate.DefaultKeyPrefix, so a
	// room's keys sit beside its item's gate keys in the same slot.
	KeyPrefix string

	// PassKey, when set, signs a pass into every admitted Status (Pass).
	// Default: the zero PassKey, no pass is signed; the caller signs one
	// from Status.User and Status.PassExpiry.
	PassKey PassKey

	// AdmitLead is how often the caller calls Admit: each call also admits
	// what falls due before the next one (never past the second's R), so a
	// second's last call does not leave its tail unadmitted. Default 0: a
	// call admits what is due by its own millisecond.
	AdmitLead time.Duration

	// ClaimWindow is how long an admitted ticket's pass waits for its page
	// to read it (a status poll) while deferring is on (seen.go): unread by
	// then it lapses and the ticket is deferred. Default
	// DefaultClaimWindow.
	ClaimWindow time.Duration

	// TicketString is the string a buyer holds for ticket number of user,
	// joined in the room's set-up epoch (Stats.Epoch): the opening hashes
	// each pre-queue ticket's into the draw's transcript (TicketLeaf), so
	// it must be the exact string the join answered. Default
	// DefaultTicketString.
	TicketString func(number int64, user, epoch string) string
}

// DefaultTicketString is the ticket string of a room without its own
// (Options.TicketString): "number:epoch:user".
func DefaultTicketString(number int64, user, epoch string) string {
	return strconv.FormatInt(number, 10) + ":" + epoch + ":" + user
}

func (o *Options) resolve() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.TicketString == nil {
		r.TicketString = DefaultTicketString
	}
	if r.ClaimWindow <= 0 {
		r.ClaimWindow = DefaultClaimWindow
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = gate.DefaultKeyPrefix
	}
	return r
}
