package stock

import (
	"errors"
	"fmt"
)

// Sentinel errors. Infrastructure failures are wrapped into ErrUnavailable;
// callers test them with errors.Is.
var (
	ErrNotFound            = errors.New("not found")
	ErrInvalid             = errors.New("invalid input")
	ErrSoldOut             = errors.New("sold out")
	ErrAlreadyPurchased    = errors.New("already purchased")
	ErrSaleNotStarted      = errors.New("sale not started")
	ErrSaleEnded           = errors.New("sale ended")
	ErrStockBelowSold      = errors.New("stock below sold")
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	ErrOrderPaid           = errors.New("order already paid")
	ErrOrderCancelled      = errors.New("order cancelled")
	ErrOrderExpired        = errors.New("order expired: its payment deadline passed")
	ErrOrderPending        = errors.New("order not yet persisted")
	// ErrOrderFailed is a lua-async order the database refused after it was
	// queued (status failed): it can be neither paid nor cancelled.
	ErrOrderFailed = errors.New("order failed: the database refused it after it was queued")
	ErrUnavailable = errors.New("backend unavailable")
	// ErrPassRequired is an order without a verified waiting-room pass
	// (OrderRequest.Pass) of an item whose room is on: the database (or,
	// for lua-async, the gate's room marker) refused it, changing nothing.
	ErrPassRequired = errors.New("the item has a waiting room: the order needs a pass")
)

// invalidError carries a message for the client and matches ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Invalidf reports bad input with a message fit for the client.
func Invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
