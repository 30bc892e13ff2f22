package stock

import "time"

// Payment is a payment the provider reported in a verified webhook event
// (docs/API.md, "Payments from the provider").
type Payment struct {
	// EventID is the provider's event id: one event is recorded once, and
	// its redelivery is answered with the first delivery's outcome.
	EventID string
	// Type is the event's type (payment_intent.succeeded, ...).
	Type string
	// OrderID is the event's metadata.order_id, as sent.
	OrderID string
	// Amount is what was paid, in the currency's smallest unit (cents).
	Amount int64
	// Currency is the ISO code, lower case as the provider sends it.
	Currency string
	// ReceivedAt is when the webhook arrived.
	ReceivedAt time.Time
	// PaidAt is when the provider says the payment happened (the signed
	// event's created time; zero when unknown). An order's payment deadline
	// is judged by it, never later than ReceivedAt: a payment made in time
	// but delivered late (the provider's retries while this service was
	// down) still pays an order the sweeper has not expired yet.
	PaidAt time.Time
}

// Payment outcomes.
const (
	// PaymentPaid: the payment matched a created order, now paid.
	PaymentPaid = "paid"
	// PaymentRefundDue: the payment matched an order that can no longer be
	// paid (expired, cancelled, failed, or paid already): the money is to
	// be given back.
	PaymentRefundDue = "refund_due"
	// PaymentRejected: the payment names no order, or its amount or
	// currency is not the item's price: recorded, the order untouched.
	PaymentRejected = "rejected"
)

// PaymentRecord is what became of a payment.
type PaymentRecord struct {
	Outcome string // one of the Payment* outcomes
	// Reason says why the payment was not taken as the order's payment
	// ("" when paid).
	Reason string
	// Duplicate: the event was recorded before (a redelivery); Outcome and
	// Reason are the first delivery's and nothing changed now.
	Duplicate bool
	// ItemID is the order's item (0 when the payment named no order, and
	// on a Duplicate).
	ItemID int64
}
