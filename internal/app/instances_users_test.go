package app_test

// What instances share about a user: an Idempotency-Key's answer and the
// per-user rate limit live in Redis, so a user who reaches two instances
// gets one answer a key and one budget (docs/DESIGN.md, "Several
// instances").

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// TestSameKeyOnTwoInstances: requests with one Idempotency-Key reach A and
// B at once (the claims are in Redis and the database, never in a
// process): one order, and every answer names it. The key from another
// user is 422 on either instance.
func TestSameKeyOnTwoInstances(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		for _, strategy := range apptest.Strategies {
			t.Run(strategy, func(t *testing.T) {
				const rounds, each = 20, 3 // per round, each instance gets `each` copies
				it := a.CreateItem(t, rounds, strategy)
				cs := []*apptest.Client{a, bb}
				for round := range rounds {
					user, key := fmt.Sprintf("keyed-%d", round), fmt.Sprintf("key-%d", round)
					ids := make([]string, 2*each)
					answers := make([]string, 2*each)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for i := range ids {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							r, err := cs[i%2].PlaceOrder(it.ID, user, key)
							answers[i] = fmt.Sprintf("instance %d: %d %s %v", i%2, r.Status, r.Body, err)
							if err == nil && ok2xx(r) {
								var o apptest.Order
								if r.JSON(t, &o); o.ID != "" {
									ids[i] = o.ID
								}
							}
						}()
					}
					close(start)
					wg.Wait()
					for i := range ids {
						if ids[i] == "" || ids[i] != ids[0] {
							t.Fatalf("round %d: answers %q, want one order id in every answer", round, answers)
						}
					}
					for i, c := range cs {
						if r, _ := c.PlaceOrder(it.ID, "thief", key); r.Status != http.StatusUnprocessableEntity {
							t.Errorf("round %d: key reused by another user on instance %d: got %d %s, want 422", round, i, r.Status, r.Body)
						}
					}
				}
				eventually(t, 30*time.Second, "orders written", func() string {
					if s := a.AdminItem(t, it.ID); s.Sold != rounds {
						return fmt.Sprintf("sold %d, want %d (one per key)", s.Sold, rounds)
					}
					return ""
				})
				if sold, _ := checkDB(t, b, it.ID); sold != rounds {
					t.Errorf("database sold %d, want %d", sold, rounds)
				}
			})
		}
	})
}

// TestRateLimitSharedByInstances: the per-user limit lives in Redis, so a
// user alternating between A and B gets one budget, not one each.
func TestRateLimitSharedByInstances(t *testing.T) {
	t.Parallel()
	twoInstances(t, func(t *testing.T, b testenv.Backend, a, bb *apptest.Client) {
		cs := []*apptest.Client{a, bb}
		var items []int64
		for range 4 {
			items = append(items, a.CreateItem(t, 5, "lua").ID)
		}
		for i, id := range items[:3] { // burst 3, across both instances
			mustOrder(t, cs[i%2], id, "hasty", "")
		}
		r, err := cs[1].PlaceOrder(items[3], "hasty", "")
		if err != nil || r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Errorf("fourth order within the minute, on B: got %d %s %v, want 429 with Retry-After", r.Status, r.Body, err)
		}
		mustOrder(t, a, items[3], "patient", "") // another user has their own budget
	}, func(c *app.Config) { c.RateUser = "3/m:3" })
}
