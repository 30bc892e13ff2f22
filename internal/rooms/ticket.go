package rooms

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sync"

	"github.com/seckill/seckill/internal/stock"
)

// A ticket string is what a buyer holds after joining: the ticket's number
// in the item's room and its owner, signed, so that nobody reads another
// buyer's status (and pass) by counting numbers, and a string of a line
// that is gone (the room turned off and on, Redis lost it) never shows the
// place of whoever holds its number in the new line. base64url without
// padding of
//
//	uvarint item id
//	uvarint ticket number
//	8 bytes    the epoch of the room's set-up the ticket was joined in
//	user id    1..64 bytes, the rest of the payload
//	16 bytes   HMAC-SHA256(ticket key, the four above), truncated
//
// The epoch (room.Stats.Epoch) is new whenever the room is set up again
// (turned off and on, or after Redis lost it): a string of another epoch
// is never answered from the loop's counters (cache.go), only by Redis,
// which checks the number's owner. The ticket key is
// HMAC-SHA256(room key, "seckill room ticket v2"), so a ticket is never a
// pass and a pass never a ticket (v1 strings, without the epoch, no longer
// open: their pages join again, and keep their place).
//
// Every join signs one and every poll checks one, so the keyed hashes are
// pooled: hmac.New hashes the key's two pads each time, Reset returns to
// the state after them.
type ticketSigner struct{ macs *sync.Pool }

const ticketMACLen = 16

func newTicketSigner(roomKey []byte) ticketSigner {
	h := hmac.New(sha256.New, roomKey)
	h.Write([]byte("seckill room ticket v2"))
	key := h.Sum(nil)
	return ticketSigner{macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// epoch names one set-up of a room (room.Stats.Epoch, decoded); zero when
// unknown, which matches no room's.
type epoch [8]byte

// epochOf decodes a room.Stats.Epoch; zero if it is not one.
func epochOf(s string) epoch {
	var ep epoch
	if b, err := hex.DecodeString(s); err == nil && len(b) == len(ep) {
		copy(ep[:], b)
	}
	return ep
}

func (s ticketSigner) sign(itemID, number int64, ep epoch, user string) string {
	buf := make([]byte, 0, 2*binary.MaxVarintLen64+len(ep)+len(user)+sha256.Size)
	buf = binary.AppendUvarint(buf, uint64(itemID))
	buf = binary.AppendUvarint(buf, uint64(number))
	buf = append(buf, ep[:]...)
	buf = append(buf, user...)
	buf = s.mac(buf, buf)[:len(buf)+ticketMACLen]
	return base64.RawURLEncoding.EncodeToString(buf)
}

// ticketString is item id's room.Options.TicketString: the string a join
// answered for a ticket, so the opening's transcript hashes the strings
// the buyers hold (room.TicketLeaf).
func (s *Service) ticketString(id int64) func(number int64, user, ep string) string {
	return func(number int64, user, ep string) string { return s.tix.sign(id, number, epochOf(ep), user) }
}

func (s ticketSigner) mac(dst, payload []byte) []byte {
	h := s.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(payload)
	dst = h.Sum(dst)
	s.macs.Put(h)
	return dst
}

// open returns the number, epoch and owner of a ticket string signed for
// itemID; ok is false for anything else (forged, malformed, another item's).
func (s ticketSigner) open(itemID int64, t string) (int64, epoch, string, bool) {
	var ep epoch
	if len(t) > base64.RawURLEncoding.EncodedLen(2*binary.MaxVarintLen64+len(ep)+stock.MaxUserIDLen+ticketMACLen) {
		return 0, ep, "", false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(t) // one string a ticket
	if err != nil || len(raw) <= ticketMACLen {
		return 0, ep, "", false
	}
	payload, sig := raw[:len(raw)-ticketMACLen], raw[len(raw)-ticketMACLen:]
	var sum [sha256.Size]byte
	if !hmac.Equal(s.mac(sum[:0], payload)[:ticketMACLen], sig) {
		return 0, ep, "", false
	}
	item, n := binary.Uvarint(payload)
	if n <= 0 {
		return 0, ep, "", false
	}
	num, m := binary.Uvarint(payload[n:])
	if m <= 0 || item != uint64(itemID) || num == 0 || num > 1<<62 {
		return 0, ep, "", false
	}
	rest := payload[n+m:]
	if len(rest) <= len(ep) {
		return 0, ep, "", false
	}
	copy(ep[:], rest)
	user := string(rest[len(ep):])
	if !stock.ValidUserID(user) {
		return 0, ep, "", false
	}
	return int64(num), ep, user, true
}
