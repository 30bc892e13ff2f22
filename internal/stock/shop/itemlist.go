package shop

import (
	"context"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// ListItems reads a page of items, newest first, as the database has them.
func (s *Service) ListItems(ctx context.Context, f stock.ItemFilter) (*stock.ItemPage, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return s.store.ListItems(ctx, f, store.Now())
}
