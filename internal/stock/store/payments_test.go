package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// paymentRig is an item priced 1250 cents and a way to sell its orders.
type paymentRig struct {
	t  *testing.T
	st *Store
	it *stock.Item
	n  int
}

func newPaymentRig(t *testing.T, b testenv.Backend) *paymentRig {
	st := newTestStore(t, b, &Options{PaymentTimeout: time.Hour})
	it := &stock.Item{Name: "paid", PriceCents: 1250, Stock: 20, Strategy: stock.StrategyLock}
	if err := st.CreateItem(context.Background(), it, nil); err != nil {
		t.Fatal(err)
	}
	return &paymentRig{t: t, st: st, it: it}
}

// order sells one new order and returns its id.
func (r *paymentRig) order() string {
	r.t.Helper()
	r.n++
	w := newWrite(r.it.ID, "buyer"+string(rune('a'+r.n)), 1)
	if err := r.st.InsertOrder(context.Background(), w, 0); err != nil {
		r.t.Fatal(err)
	}
	return w.Order.ID
}

func (r *paymentRig) pay(event, order string, amount int64, currency string, at time.Time) stock.PaymentRecord {
	r.t.Helper()
	rec, err := r.st.RecordPayment(context.Background(), stock.Payment{EventID: event, Type: "payment_intent.succeeded",
		OrderID: order, Amount: amount, Currency: currency, ReceivedAt: at}, "usd")
	if err != nil {
		r.t.Fatalf("record payment %s: %v", event, err)
	}
	return rec
}

func (r *paymentRig) status(order string) string {
	r.t.Helper()
	o, err := r.st.Order(context.Background(), order)
	if err != nil {
		r.t.Fatal(err)
	}
	return o.Status
}

func wantOutcome(t *testing.T, rec stock.PaymentRecord, outcome string, dup bool) {
	t.Helper()
	if rec.Outcome != outcome || rec.Duplicate != dup {
		t.Fatalf("payment: %+v, want outcome %s duplicate %v", rec, outcome, dup)
	}
}

// A matching payment pays its order once, with one paid event; its
// redelivery changes nothing and answers paid again; a second payment of
// the paid order is refund_due.
func TestRecordPaymentPaysOnce(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		r := newPaymentRig(t, b)
		id := r.order()
		now := Now()
		if rec := r.pay("evt_1", id, 1250, "USD", now); rec.Outcome != stock.PaymentPaid || rec.Duplicate || rec.ItemID != r.it.ID {
			t.Fatalf("payment: %+v, want paid of item %d", rec, r.it.ID)
		}
		if s := r.status(id); s != stock.StatusPaid {
			t.Fatalf("order is %s after its payment", s)
		}
		wantTypes(t, r.st, id, "created/created", "paid/paid")
		wantOutcome(t, r.pay("evt_1", id, 1250, "usd", now.Add(time.Minute)), stock.PaymentPaid, true)
		wantTypes(t, r.st, id, "created/created", "paid/paid")
		rec := r.pay("evt_2", id, 1250, "usd", now.Add(time.Minute))
		wantOutcome(t, rec, stock.PaymentRefundDue, false)
		if rec.Reason != "the order was paid already" {
			t.Fatalf("reason %q", rec.Reason)
		}
		wantTypes(t, r.st, id, "created/created", "paid/paid", "refund_due/paid")
		pe, err := r.st.PaymentEvents(context.Background(), id)
		if err != nil || len(pe) != 2 || pe[0].EventID != "evt_1" || pe[0].Outcome != stock.PaymentPaid ||
			pe[1].EventID != "evt_2" || pe[1].Outcome != stock.PaymentRefundDue || pe[0].Amount != 1250 || pe[0].Currency != "USD" {
			t.Fatalf("payment events %+v %v", pe, err)
		}
	})
}

// A wrong amount or currency, or no such order, is rejected and recorded;
// the order stays unpaid and gets no event.
func TestRecordPaymentRejectsMismatches(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		r := newPaymentRig(t, b)
		id := r.order()
		now := Now()
		for _, c := range []struct {
			event, order, currency string
			amount                 int64
		}{
			{"evt_low", id, "usd", 1249},
			{"evt_high", id, "usd", 1251},
			{"evt_eur", id, "eur", 1250},
			{"evt_unknown", uuid.NewString(), "usd", 1250},
			{"evt_garbage", "not an order", "usd", 1250},
			{"evt_empty", "", "usd", 1250},
		} {
			rec := r.pay(c.event, c.order, c.amount, c.currency, now)
			wantOutcome(t, rec, stock.PaymentRejected, false)
			if rec.Reason == "" {
				t.Fatalf("%s: rejected without a reason", c.event)
			}
			wantOutcome(t, r.pay(c.event, c.order, c.amount, c.currency, now), stock.PaymentRejected, true)
		}
		if s := r.status(id); s != stock.StatusCreated {
			t.Fatalf("order is %s after rejected payments", s)
		}
		wantTypes(t, r.st, id, "created/created")
		pe, err := r.st.PaymentEvents(context.Background(), id)
		if err != nil || len(pe) != 3 {
			t.Fatalf("payment events of the order %+v %v", pe, err)
		}
		// The right payment still pays it.
		wantOutcome(t, r.pay("evt_ok", id, 1250, "usd", now), stock.PaymentPaid, false)
	})
}

// A payment for a cancelled, expired or overdue order is refund_due, with
// a refund_due event, and leaves the order as it was.
func TestRecordPaymentOfUnpayableOrderIsRefundDue(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		r := newPaymentRig(t, b)
		ctx := context.Background()
		now := Now()
		cancelled, expired, overdue := r.order(), r.order(), r.order()
		if won, err := r.st.CancelOrder(ctx, &stock.Order{ID: cancelled, ItemID: r.it.ID}, now, false, true); err != nil || !won {
			t.Fatalf("cancel: %v %v", won, err)
		}
		later := now.Add(2 * time.Hour) // past the hour's payment deadline
		if won, err := r.st.CancelOrder(ctx, &stock.Order{ID: expired, ItemID: r.it.ID}, later, true, true); err != nil || !won {
			t.Fatalf("expire: %v %v", won, err)
		}
		for _, c := range []struct{ order, reason, events string }{
			{cancelled, "the order is cancelled", "cancelled/cancelled"},
			{expired, "the order expired", "expired/cancelled"},
			{overdue, "the order's payment deadline had passed", ""},
		} {
			rec := r.pay("evt_"+c.order, c.order, 1250, "usd", later)
			wantOutcome(t, rec, stock.PaymentRefundDue, false)
			if rec.Reason != c.reason {
				t.Fatalf("reason %q, want %q", rec.Reason, c.reason)
			}
			want := []string{"created/created"}
			if c.events != "" {
				want = append(want, c.events)
			}
			status := stock.StatusCancelled
			if c.order == overdue {
				status = stock.StatusCreated
			}
			want = append(want, "refund_due/"+status)
			wantTypes(t, r.st, c.order, want...)
			if s := r.status(c.order); s != status {
				t.Fatalf("order is %s, want %s", s, status)
			}
			wantOutcome(t, r.pay("evt_"+c.order, c.order, 1250, "usd", later), stock.PaymentRefundDue, true)
			wantTypes(t, r.st, c.order, want...)
		}
	})
}

// A payment the provider made before the deadline but delivered after it
// (PaidAt in time) pays an order the sweeper has not expired yet; one made
// after it is refund_due; a PaidAt later than the arrival counts as the
// arrival.
func TestRecordPaymentJudgesTheDeadlineByPaidAt(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		r := newPaymentRig(t, b)
		now := Now()
		later := now.Add(2 * time.Hour) // past the hour's payment deadline
		pay := func(event, order string, paidAt time.Time) stock.PaymentRecord {
			rec, err := r.st.RecordPayment(context.Background(), stock.Payment{EventID: event, Type: "payment_intent.succeeded",
				OrderID: order, Amount: 1250, Currency: "usd", ReceivedAt: later, PaidAt: paidAt}, "usd")
			if err != nil {
				t.Fatal(err)
			}
			return rec
		}
		inTime, late, future := r.order(), r.order(), r.order()
		wantOutcome(t, pay("evt_in_time", inTime, now.Add(30*time.Minute)), stock.PaymentPaid, false)
		wantTypes(t, r.st, inTime, "created/created", "paid/paid")
		wantOutcome(t, pay("evt_late", late, now.Add(90*time.Minute)), stock.PaymentRefundDue, false)
		wantOutcome(t, pay("evt_future", future, later.Add(time.Hour)), stock.PaymentRefundDue, false)
		if s := r.status(late); s != stock.StatusCreated {
			t.Fatalf("the late-paid order is %s", s)
		}
	})
}

// Deliveries racing on one order: of eight concurrent deliveries of one
// event exactly one records it (the others wait for its commit and answer
// its outcome as duplicates), and of two events paying the same order one
// pays it and the other is refund_due: one paid event in all.
func TestRecordPaymentConcurrentDeliveries(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		r := newPaymentRig(t, b)
		id := r.order()
		now := Now()
		type result struct {
			rec stock.PaymentRecord
			err error
		}
		events := []string{"evt_a", "evt_a", "evt_a", "evt_a", "evt_b", "evt_b", "evt_b", "evt_b"}
		out := make(chan result, len(events))
		var wg sync.WaitGroup
		for _, ev := range events {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				rec, err := r.st.RecordPayment(ctx, stock.Payment{EventID: ev, Type: "payment_intent.succeeded",
					OrderID: id, Amount: 1250, Currency: "usd", ReceivedAt: now}, "usd")
				out <- result{rec, err}
			}()
		}
		wg.Wait()
		close(out)
		firsts := map[string]int{}
		for res := range out {
			if res.err != nil {
				t.Fatalf("record payment: %v", res.err)
			}
			if !res.rec.Duplicate {
				firsts[res.rec.Outcome]++
			}
		}
		if firsts[stock.PaymentPaid] != 1 || firsts[stock.PaymentRefundDue] != 1 || len(firsts) != 2 {
			t.Fatalf("first deliveries by outcome %v, want one paid and one refund_due", firsts)
		}
		wantTypes(t, r.st, id, "created/created", "paid/paid", "refund_due/paid")
	})
}
