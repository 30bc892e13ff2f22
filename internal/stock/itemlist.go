package stock

import "time"

// Sale statuses of an item, as the admin list filters them.
const (
	SaleUpcoming = "upcoming" // its window has not opened
	SaleOnSale   = "on_sale"  // open, with units left in the database
	SaleSoldOut  = "sold_out" // open, every unit sold in the database
	SaleEnded    = "ended"    // its window has closed
)

// MaxListLimit caps one page of ListItems.
const MaxListLimit = 200

// SaleStatus is the item's sale status at now. The window comes first: an
// ended sale is ended whether or not it sold out. On lua-async items the
// database's sold lags the gate by the queue, so an item can be on sale here
// while the gate already refuses with sold out.
func (it *Item) SaleStatus(now time.Time) string {
	switch {
	case it.EndsAt != nil && !now.Before(*it.EndsAt):
		return SaleEnded
	case it.StartsAt != nil && now.Before(*it.StartsAt):
		return SaleUpcoming
	case it.Sold >= it.Stock:
		return SaleSoldOut
	}
	return SaleOnSale
}

// ItemFilter selects a page of items, newest first.
type ItemFilter struct {
	// Status keeps the items whose SaleStatus is this one; "" keeps all.
	Status string
	// Before keeps the items with a smaller id (the previous page's
	// NextBefore); 0 starts at the newest.
	Before int64
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

// ItemPage is one page of items. NextBefore is the Before of the next
// page, 0 when this is the last.
type ItemPage struct {
	Items      []*Item
	NextBefore int64
}

// Validate checks a filter as the API takes it.
func (f ItemFilter) Validate() error {
	switch f.Status {
	case "", SaleUpcoming, SaleOnSale, SaleSoldOut, SaleEnded:
	default:
		return Invalidf("status must be one of %q, %q, %q or %q", SaleUpcoming, SaleOnSale, SaleSoldOut, SaleEnded)
	}
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return Invalidf("limit must be from 1 to %d", MaxListLimit)
	}
	if f.Before < 0 {
		return Invalidf("before must be a positive item id")
	}
	return nil
}
