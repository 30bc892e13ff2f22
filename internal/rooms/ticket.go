package rooms

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// A ticket string is what a buyer holds after joining: the ticket's number
// in the item's room, signed, so that nobody reads another buyer's status
// (and pass) by counting numbers. base64url without padding of
//
//	uvarint item id
//	uvarint ticket number
//	16 bytes   HMAC-SHA256(ticket key, the two above), truncated
//
// The ticket key is HMAC-SHA256(room key, "seckill room ticket v1"), so a
// ticket is never a pass and a pass never a ticket.
type ticketSigner struct{ key []byte }

const ticketMACLen = 16

func newTicketSigner(roomKey []byte) ticketSigner {
	h := hmac.New(sha256.New, roomKey)
	h.Write([]byte("seckill room ticket v1"))
	return ticketSigner{key: h.Sum(nil)}
}

func (s ticketSigner) sign(itemID, number int64) string {
	buf := make([]byte, 0, 2*binary.MaxVarintLen64+sha256.Size)
	buf = binary.AppendUvarint(buf, uint64(itemID))
	buf = binary.AppendUvarint(buf, uint64(number))
	buf = s.mac(buf, buf)[:len(buf)+ticketMACLen]
	return base64.RawURLEncoding.EncodeToString(buf)
}

func (s ticketSigner) mac(dst, payload []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write(payload)
	return h.Sum(dst)
}

// open returns the number of a ticket string signed for itemID; ok is false
// for anything else (forged, malformed, another item's).
func (s ticketSigner) open(itemID int64, t string) (int64, bool) {
	if len(t) > base64.RawURLEncoding.EncodedLen(2*binary.MaxVarintLen64+ticketMACLen) {
		return 0, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil || len(raw) <= ticketMACLen {
		return 0, false
	}
	payload, sig := raw[:len(raw)-ticketMACLen], raw[len(raw)-ticketMACLen:]
	var sum [sha256.Size]byte
	if !hmac.Equal(s.mac(sum[:0], payload)[:ticketMACLen], sig) {
		return 0, false
	}
	item, n := binary.Uvarint(payload)
	if n <= 0 {
		return 0, false
	}
	num, m := binary.Uvarint(payload[n:])
	if m <= 0 || n+m != len(payload) || item != uint64(itemID) || num == 0 || num > 1<<62 {
		return 0, false
	}
	return int64(num), true
}
