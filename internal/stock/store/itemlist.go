package store

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// ListItems reads a page of items whose sale status at now is f.Status.
// The status is filtered in SQL, as SaleStatus decides it, so a page is
// full whenever more items match.
func (s *Store) ListItems(ctx context.Context, f stock.ItemFilter, now time.Time) (*stock.ItemPage, error) {
	q := s.db.WithContext(ctx).Model(&itemRow{}).Select(itemColumns).Order("id DESC").Limit(f.Limit + 1)
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	ended := "(ends_at IS NOT NULL AND ends_at <= ?)"
	upcoming := "(starts_at IS NOT NULL AND starts_at > ?)"
	open := "NOT " + ended + " AND NOT " + upcoming
	switch f.Status {
	case stock.SaleEnded:
		q = q.Where(ended, now)
	case stock.SaleUpcoming:
		q = q.Where("NOT "+ended+" AND "+upcoming, now, now)
	case stock.SaleSoldOut:
		q = q.Where(open+" AND "+soldOf+" >= stock", now, now)
	case stock.SaleOnSale:
		q = q.Where(open+" AND "+soldOf+" < stock", now, now)
	}
	var rows []itemRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, dbError("list items", err)
	}
	page := &stock.ItemPage{Items: make([]*stock.Item, 0, min(len(rows), f.Limit))}
	for i := range rows {
		if i == f.Limit {
			page.NextBefore = rows[i-1].ID
			break
		}
		page.Items = append(page.Items, rows[i].item())
	}
	return page, nil
}
