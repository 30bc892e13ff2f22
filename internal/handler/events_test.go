package handler

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// stalledFeed is a database that never answers: it returns when the
// read's context ends, with the error the store gives then.
type stalledFeed struct{ asked chan int64 }

func (f stalledFeed) EventsAfter(ctx context.Context, after int64, _ int) ([]store.Event, error) {
	f.asked <- after
	<-ctx.Done()
	return nil, fmt.Errorf("database: read events: %w: %w", stock.ErrUnavailable, ctx.Err())
}

// answeringFeed answers every read with one event after the cursor.
type answeringFeed struct{}

func (answeringFeed) EventsAfter(_ context.Context, after int64, _ int) ([]store.Event, error) {
	return []store.Event{{ID: "0190a0b4-0000-7000-8000-000000000001", Type: store.EventCreated, OrderID: "0190a0b4-0000-7000-8000-0000000000aa",
		ItemID: 1, UserID: "ann", Status: "created", At: time.Unix(0, 0).UTC(), PubSeq: after + 1}}, nil
}

func (answeringFeed) OrderEvents(_ context.Context, id string) ([]store.Event, error) {
	return []store.Event{{ID: "0190a0b4-0000-7000-8000-000000000002", Type: store.EventCreated, OrderID: id,
		ItemID: 1, UserID: "ann", Status: "created", At: time.Unix(0, 0).UTC()}}, nil
}

func (answeringFeed) PaymentEvents(_ context.Context, id string) ([]store.PaymentEvent, error) {
	return nil, nil
}

func (f stalledFeed) OrderEvents(ctx context.Context, _ string) ([]store.Event, error) {
	_, err := f.EventsAfter(ctx, -1, 0)
	return nil, err
}

func (f stalledFeed) PaymentEvents(ctx context.Context, _ string) ([]store.PaymentEvent, error) {
	_, err := f.EventsAfter(ctx, -1, 0)
	return nil, err
}

// A stalled database: the feed answers 503 unavailable once its bound
// (EventsTimeout, the app's SECKILL_DB_TIMEOUT) ends the read, not at the
// request's deadline. Without a feed configured, the route is a 404.
func TestEventFeedStalledDatabaseIs503(t *testing.T) {
	t.Parallel()
	feed := stalledFeed{asked: make(chan int64, 1)}
	h := newTestHandler(t, &fakeShop{}, Config{Events: feed, EventsTimeout: 50 * time.Millisecond, RequestTimeout: time.Hour})
	a := call(h, "GET", "/api/v1/admin/events?after=7", "", adminHeader)
	if a.status != http.StatusServiceUnavailable || a.code() != CodeUnavailable {
		t.Fatalf("stalled feed: got %d %s, want 503 unavailable", a.status, a.body)
	}
	if got := <-feed.asked; got != 7 {
		t.Errorf("the feed was asked after %d, want 7", got)
	}
	if a := call(newTestHandler(t, &fakeShop{}, Config{}), "GET", "/api/v1/admin/events", "", adminHeader); a.status != http.StatusNotFound {
		t.Errorf("no feed: got %d %s, want 404", a.status, a.body)
	}
}
