package stock

import (
	"context"
	"time"
)

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

// ListItems reads a page of items, newest first, as the database has them.
func (s *Service) ListItems(ctx context.Context, f ItemFilter) (*ItemPage, error) {
	switch f.Status {
	case "", SaleUpcoming, SaleOnSale, SaleSoldOut, SaleEnded:
	default:
		return nil, Invalidf("status must be one of %q, %q, %q or %q", SaleUpcoming, SaleOnSale, SaleSoldOut, SaleEnded)
	}
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return nil, Invalidf("limit must be from 1 to %d", MaxListLimit)
	}
	if f.Before < 0 {
		return nil, Invalidf("before must be a positive item id")
	}
	return s.store.ListItems(ctx, f, dbNow())
}

// ListItems reads a page of items whose sale status at now is f.Status.
// The status is filtered in SQL, as SaleStatus decides it, so a page is
// full whenever more items match.
func (s *Store) ListItems(ctx context.Context, f ItemFilter, now time.Time) (*ItemPage, error) {
	q := s.db.WithContext(ctx).Model(&itemRow{}).Order("id DESC").Limit(f.Limit + 1)
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	ended := "(ends_at IS NOT NULL AND ends_at <= ?)"
	upcoming := "(starts_at IS NOT NULL AND starts_at > ?)"
	open := "NOT " + ended + " AND NOT " + upcoming
	switch f.Status {
	case SaleEnded:
		q = q.Where(ended, now)
	case SaleUpcoming:
		q = q.Where("NOT "+ended+" AND "+upcoming, now, now)
	case SaleSoldOut:
		q = q.Where(open+" AND sold >= stock", now, now)
	case SaleOnSale:
		q = q.Where(open+" AND sold < stock", now, now)
	}
	var rows []itemRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, dbError("list items", err)
	}
	page := &ItemPage{Items: make([]*Item, 0, min(len(rows), f.Limit))}
	for i := range rows {
		if i == f.Limit {
			page.NextBefore = rows[i-1].ID
			break
		}
		page.Items = append(page.Items, rows[i].item())
	}
	return page, nil
}
