package stock

import (
	"regexp"
	"unicode"
	"unicode/utf8"
)

// ValidateNewItem checks an item an admin supplies; its Strategy must be
// set (the service fills in its default first).
func ValidateNewItem(in NewItem) error {
	switch {
	case len(in.Name) == 0 || len(in.Name) > MaxNameLen:
		return Invalidf("name must be 1 to %d bytes", MaxNameLen)
	case !validName(in.Name):
		return Invalidf("name must be one line of valid UTF-8 text with at least one visible character and no control characters")
	case in.Stock < 0 || in.Stock > MaxStock:
		return Invalidf("stock must be between 0 and %d", MaxStock)
	case in.PriceCents < 0 || in.PriceCents > MaxPriceCents:
		return Invalidf("price_cents must be between 0 and %d", MaxPriceCents)
	case !in.Strategy.Valid():
		return Invalidf("strategy must be %q, %q or %q", StrategyLua, StrategyLock, StrategyLuaAsync)
	case ValidateBuckets(in.Buckets) != nil:
		return ValidateBuckets(in.Buckets)
	case in.StartsAt != nil && in.EndsAt != nil && !in.EndsAt.After(*in.StartsAt):
		return Invalidf("ends_at must be after starts_at")
	}
	return nil
}

// validName reports whether an item name is text a page can show as one
// line: valid UTF-8, no control character (C0, DEL, C1) or line break, and
// not blank (at least one rune that is neither a space nor an invisible
// format rune such as a zero-width space; a zero-width joiner between emoji
// is fine).
func validName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	visible := false
	for _, r := range name {
		switch {
		case unicode.IsControl(r), r == '\u2028', r == '\u2029':
			return false
		case !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r):
			visible = true
		}
	}
	return visible
}

// ValidateBuckets checks an item's bucket count as an admin gives it.
func ValidateBuckets(n int) error {
	if n < 1 || n > MaxBuckets {
		return Invalidf("buckets must be an integer from 1 to %d", MaxBuckets)
	}
	return nil
}

// ValidateStock checks a stock level an admin sets.
func ValidateStock(n int64) error {
	if n < 0 || n > MaxStock {
		return Invalidf("stock must be between 0 and %d", MaxStock)
	}
	return nil
}

// ValidateOrderRequest checks an order attempt's fields.
func ValidateOrderRequest(req OrderRequest) error {
	switch {
	case req.ItemID <= 0:
		return Invalidf("item id must be a positive integer")
	case !ValidUserID(req.UserID):
		return errBadUserID()
	case len(req.IdempotencyKey) > MaxIdemKeyLen || !printableASCII(req.IdempotencyKey):
		return Invalidf("Idempotency-Key must be at most %d printable ASCII characters", MaxIdemKeyLen)
	}
	return nil
}

// ValidateUserID checks a user id given with a payment or cancellation.
func ValidateUserID(userID string) error {
	if !ValidUserID(userID) {
		return errBadUserID()
	}
	return nil
}

func errBadUserID() error {
	return Invalidf("user_id must be 1 to %d characters of A-Z a-z 0-9 . _ : @ -", MaxUserIDLen)
}

// ValidUserID reports whether s is 1 to 64 characters of [A-Za-z0-9._:@-]
// (a loop: it runs on every order).
func ValidUserID(s string) bool {
	if len(s) == 0 || len(s) > MaxUserIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}

var orderIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidOrderID reports whether id is an order id: a lowercase UUID.
func ValidOrderID(id string) bool { return orderIDPattern.MatchString(id) }

// ValidateOrderID checks an order id given by a client.
func ValidateOrderID(id string) error {
	if !ValidOrderID(id) {
		return Invalidf("order id must be a lowercase UUID")
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
