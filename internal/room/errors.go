package room

import (
	"errors"
	"fmt"
)

// Pass errors. Every one matches ErrPassRejected, so a caller that only
// needs "refuse the order" tests that; the handler maps each to its own code.
var (
	// ErrPassRejected is the parent of every reason a pass is refused.
	ErrPassRejected = errors.New("room: pass rejected")

	// ErrPassMissing: no pass was given.
	ErrPassMissing = fmt.Errorf("%w: missing", ErrPassRejected)

	// ErrPassForged: the pass does not decode, or its signature does not
	// match its contents under the key (tampered, or signed by another key).
	ErrPassForged = fmt.Errorf("%w: forged or malformed", ErrPassRejected)

	// ErrPassExpired: the signature is good but the pass's expiry has passed.
	ErrPassExpired = fmt.Errorf("%w: expired", ErrPassRejected)

	// ErrPassWrongUser: a good pass issued to another user.
	ErrPassWrongUser = fmt.Errorf("%w: issued to another user", ErrPassRejected)

	// ErrPassWrongItem: a good pass issued for another item.
	ErrPassWrongItem = fmt.Errorf("%w: issued for another item", ErrPassRejected)

	// ErrPassWrongLine: a good pass issued in another line of the item's
	// room, one it has since started over from (PassKey.VerifyIn).
	ErrPassWrongLine = fmt.Errorf("%w: issued in another line of the room", ErrPassRejected)
)

// Draw errors.
var (
	// ErrSeedMismatch: the seed does not hash to the room's commitment.
	ErrSeedMismatch = errors.New("room: seed does not match the commitment")

	// ErrDuplicateTicket: a ticket appears twice in a pre-queue.
	ErrDuplicateTicket = errors.New("room: duplicate ticket in the pre-queue")
)

// Room errors.
var (
	// ErrInvalid: an argument is out of range (a short key, an empty user,
	// a negative rate...). Nothing was changed.
	ErrInvalid = errors.New("room: invalid argument")

	// ErrFull: the room holds as many tickets as it may (JoinManyCapped);
	// a user without one gets none.
	ErrFull = errors.New("room: full")
	// ErrNoRoom: the item has no waiting room (never set up, or deleted).
	ErrNoRoom = errors.New("room: no waiting room for this item")

	// ErrRoomExists: Setup was called again with another commitment.
	ErrRoomExists = errors.New("room: already set up with another commitment")

	// ErrSoldOut: the room is closed because the item sold out; nobody
	// joins and nobody is admitted until Resume.
	ErrSoldOut = errors.New("room: sold out")

	// ErrStaleMark: Admit was given a mark older than SpentGrace by the
	// room's Redis clock: it admitted nobody (expired passes still left).
	// The caller takes a new mark and reads the stock again.
	ErrStaleMark = errors.New("room: admission mark older than SpentGrace")

	// ErrUnknownTicket: no such ticket in this item's room.
	ErrUnknownTicket = errors.New("room: unknown ticket")

	// ErrNotLive: Consume found the ticket's pass not live: never admitted,
	// expired, or already used (ErrPassUsed).
	ErrNotLive = errors.New("room: pass not live")

	// ErrPassUsed: Consume found the pass already used.
	ErrPassUsed = fmt.Errorf("%w: already used", ErrNotLive)

	// ErrUnavailable wraps every Redis error: the room's state is unknown,
	// so callers fail closed (a fast 503), never open.
	ErrUnavailable = errors.New("room: redis unavailable")
)
