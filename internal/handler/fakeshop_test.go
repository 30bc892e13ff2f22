package handler

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill/seckill/internal/stock"
)

// fakeShop is a Shop whose every method is a field: a test sets the ones
// it expects to be called, and any other call fails the test.
type fakeShop struct {
	t            *testing.T
	createItem   func(ctx context.Context, in stock.NewItem) (*stock.Item, error)
	listItems    func(ctx context.Context, f stock.ItemFilter) (*stock.ItemPage, error)
	item         func(ctx context.Context, id int64) (*stock.Item, error)
	setStock     func(ctx context.Context, id, n int64) (*stock.Item, *stock.Item, error)
	placeOrder   func(ctx context.Context, req stock.OrderRequest) (*stock.Order, bool, error)
	order        func(ctx context.Context, id string) (*stock.Order, error)
	payOrder     func(ctx context.Context, id, userID string) (*stock.Order, error)
	cancelOrder  func(ctx context.Context, id, userID string) (*stock.Order, error)
	ready        func(ctx context.Context) error
	asyncStats   func(ctx context.Context, id int64) (stock.AsyncStats, error)
	backlog      func(ctx context.Context) (stock.AsyncStats, error)
	deadLetters  func(ctx context.Context, id, limit int64) ([]stock.DeadLetter, error)
	requeue      func(ctx context.Context, id int64) (int, error)
	reconcile    func(ctx context.Context, id int64, repair bool) (*stock.Reconciliation, error)
	knownSoldOut func(itemID int64) bool
	knownBought  func(itemID int64, userID string) bool
	itemView     func(ctx context.Context, id int64) (*stock.ItemView, error)
}

var _ Shop = (*fakeShop)(nil)

func (f *fakeShop) unexpected(name string) {
	f.t.Helper()
	f.t.Errorf("unexpected call to Shop.%s", name)
}

func (f *fakeShop) CreateItem(ctx context.Context, in stock.NewItem) (*stock.Item, error) {
	if f.createItem == nil {
		f.unexpected("CreateItem")
		return nil, errors.New("unexpected")
	}
	return f.createItem(ctx, in)
}

func (f *fakeShop) ListItems(ctx context.Context, flt stock.ItemFilter) (*stock.ItemPage, error) {
	if f.listItems == nil {
		f.unexpected("ListItems")
		return nil, errors.New("unexpected")
	}
	return f.listItems(ctx, flt)
}

func (f *fakeShop) Item(ctx context.Context, id int64) (*stock.Item, error) {
	if f.item == nil {
		f.unexpected("Item")
		return nil, errors.New("unexpected")
	}
	return f.item(ctx, id)
}

func (f *fakeShop) SetStock(ctx context.Context, id, n int64) (*stock.Item, *stock.Item, error) {
	if f.setStock == nil {
		f.unexpected("SetStock")
		return nil, nil, errors.New("unexpected")
	}
	return f.setStock(ctx, id, n)
}

func (f *fakeShop) PlaceOrder(ctx context.Context, req stock.OrderRequest) (*stock.Order, bool, error) {
	if f.placeOrder == nil {
		f.unexpected("PlaceOrder")
		return nil, false, errors.New("unexpected")
	}
	return f.placeOrder(ctx, req)
}

func (f *fakeShop) KnownSoldOut(itemID int64) bool {
	if f.knownSoldOut == nil {
		return false
	}
	return f.knownSoldOut(itemID)
}

func (f *fakeShop) KnownPurchased(itemID int64, userID string) bool {
	if f.knownBought == nil {
		return false
	}
	return f.knownBought(itemID, userID)
}

func (f *fakeShop) ItemView(ctx context.Context, id int64) (*stock.ItemView, error) {
	if f.itemView == nil {
		f.unexpected("ItemView")
		return nil, errors.New("unexpected")
	}
	return f.itemView(ctx, id)
}

func (f *fakeShop) Order(ctx context.Context, id string) (*stock.Order, error) {
	if f.order == nil {
		f.unexpected("Order")
		return nil, errors.New("unexpected")
	}
	return f.order(ctx, id)
}

func (f *fakeShop) PayOrder(ctx context.Context, id, userID string) (*stock.Order, error) {
	if f.payOrder == nil {
		f.unexpected("PayOrder")
		return nil, errors.New("unexpected")
	}
	return f.payOrder(ctx, id, userID)
}

func (f *fakeShop) CancelOrder(ctx context.Context, id, userID string) (*stock.Order, error) {
	if f.cancelOrder == nil {
		f.unexpected("CancelOrder")
		return nil, errors.New("unexpected")
	}
	return f.cancelOrder(ctx, id, userID)
}

func (f *fakeShop) Ready(ctx context.Context) error {
	if f.ready == nil {
		f.unexpected("Ready")
		return errors.New("unexpected")
	}
	return f.ready(ctx)
}

func (f *fakeShop) AsyncStats(ctx context.Context, id int64) (stock.AsyncStats, error) {
	if f.asyncStats == nil {
		f.unexpected("AsyncStats")
		return stock.AsyncStats{}, errors.New("unexpected")
	}
	return f.asyncStats(ctx, id)
}

func (f *fakeShop) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	if f.backlog == nil {
		f.unexpected("Backlog")
		return stock.AsyncStats{}, errors.New("unexpected")
	}
	return f.backlog(ctx)
}

func (f *fakeShop) DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error) {
	if f.deadLetters == nil {
		f.unexpected("DeadLetters")
		return nil, errors.New("unexpected")
	}
	return f.deadLetters(ctx, id, limit)
}

func (f *fakeShop) RequeueDeadLetters(ctx context.Context, id int64) (int, error) {
	if f.requeue == nil {
		f.unexpected("RequeueDeadLetters")
		return 0, errors.New("unexpected")
	}
	return f.requeue(ctx, id)
}

func (f *fakeShop) Reconcile(ctx context.Context, id int64, repair bool) (*stock.Reconciliation, error) {
	if f.reconcile == nil {
		f.unexpected("Reconcile")
		return nil, errors.New("unexpected")
	}
	return f.reconcile(ctx, id, repair)
}
