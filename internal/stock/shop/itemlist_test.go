package shop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// TestListItems: each status filter returns exactly the items SaleStatus
// gives that status, newest first, and pages of any size walk every match
// once.
func TestListItems(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		now := time.Now().UTC()
		at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
		cases := []struct {
			name         string
			stock        int64
			starts, ends *time.Time
			buy          int
			want         string
		}{
			{"open, no window", 5, nil, nil, 0, stock.SaleOnSale},
			{"upcoming", 5, at(time.Hour), nil, 0, stock.SaleUpcoming},
			{"upcoming with an end", 5, at(time.Hour), at(2 * time.Hour), 0, stock.SaleUpcoming},
			{"ended", 5, at(-2 * time.Hour), at(-time.Hour), 0, stock.SaleEnded},
			{"no stock", 0, nil, nil, 0, stock.SaleSoldOut},
			{"in its window", 3, at(-time.Hour), at(time.Hour), 1, stock.SaleOnSale},
			{"sold out by orders", 2, at(-time.Hour), nil, 2, stock.SaleSoldOut},
			{"ends soon", 3, nil, at(time.Hour), 0, stock.SaleOnSale},
		}
		want := map[string][]int64{}
		var all []int64
		for _, c := range cases {
			it, err := s.CreateItem(ctx, stock.NewItem{Name: c.name, Stock: c.stock, StartsAt: c.starts, EndsAt: c.ends})
			if err != nil {
				t.Fatalf("create %s: %v", c.name, err)
			}
			for i := range c.buy {
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "u" + string(rune('a'+i))}); err != nil {
					t.Fatalf("buy %s: %v", c.name, err)
				}
			}
			want[c.want] = append([]int64{it.ID}, want[c.want]...)
			all = append([]int64{it.ID}, all...)
		}
		for _, status := range []string{stock.SaleUpcoming, stock.SaleOnSale, stock.SaleSoldOut, stock.SaleEnded} {
			page, err := s.ListItems(ctx, stock.ItemFilter{Status: status, Limit: stock.MaxListLimit})
			if err != nil {
				t.Fatalf("list %s: %v", status, err)
			}
			var got []int64
			for _, it := range page.Items {
				got = append(got, it.ID)
				if st := it.SaleStatus(time.Now()); st != status {
					t.Errorf("item %d %q listed as %s has SaleStatus %s", it.ID, it.Name, status, st)
				}
			}
			if !slices.Equal(got, want[status]) || page.NextBefore != 0 {
				t.Errorf("list %s: got %v next %d, want %v next 0", status, got, page.NextBefore, want[status])
			}
		}

		for _, size := range []int{1, 3, len(cases)} {
			var got []int64
			before := int64(0)
			for pages := 0; ; pages++ {
				if pages > len(cases) {
					t.Fatalf("pages of %d: more pages than items", size)
				}
				page, err := s.ListItems(ctx, stock.ItemFilter{Before: before, Limit: size})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) > size {
					t.Errorf("pages of %d: a page of %d", size, len(page.Items))
				}
				for _, it := range page.Items {
					got = append(got, it.ID)
				}
				if page.NextBefore == 0 {
					break
				}
				before = page.NextBefore
			}
			if !slices.Equal(got, all) {
				t.Errorf("pages of %d: got %v, want %v", size, got, all)
			}
		}

		for _, f := range []stock.ItemFilter{{Status: "sold-out", Limit: 1}, {Limit: 0}, {Limit: stock.MaxListLimit + 1}, {Before: -1, Limit: 1}} {
			if _, err := s.ListItems(ctx, f); !errors.Is(err, stock.ErrInvalid) {
				t.Errorf("list %+v: got %v, want ErrInvalid", f, err)
			}
		}
	})
}
