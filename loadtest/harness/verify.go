package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DBOrder is one row of the orders table.
type DBOrder struct {
	ID     string
	UserID string
	Status string
}

// DBItem is the counters of one row of the items table.
type DBItem struct {
	Stock int
	Sold  int
}

// Store reads the service's database directly.
type Store interface {
	Orders(ctx context.Context, itemID int64) ([]DBOrder, error)
	Item(ctx context.Context, itemID int64) (DBItem, error)
}

// Invariant is the verdict on one property of the sale.
type Invariant struct {
	Name    string `json:"name"`
	Pass    bool   `json:"pass"`
	Skipped bool   `json:"skipped,omitempty"` // could not be checked (no DB access); never counts as a failure
	// Timing marks a verdict on speed (the room's rate, its closing within
	// a second), which a starved machine can fail without a bug; it still
	// counts in the run's verdict.
	Timing bool   `json:"timing,omitempty"`
	Detail string `json:"detail"`
}

func (inv Invariant) Verdict() string {
	switch {
	case inv.Skipped:
		return "SKIP"
	case inv.Pass:
		return "PASS"
	}
	return "FAIL"
}

const maxListed = 5

func listSome(xs []string) string {
	sort.Strings(xs)
	if len(xs) > maxListed {
		return strings.Join(xs[:maxListed], ", ") + fmt.Sprintf(", ... (%d in all)", len(xs))
	}
	return strings.Join(xs, ", ")
}

// verify checks the invariants of one strategy's sale and stores them in sr.
func verify(ctx context.Context, cfg Config, cl *client, sr *StrategyReport) error {
	recs := sr.Records
	S := cfg.Stock

	// Client-side view.
	users := map[string]bool{}
	unknownUsers := map[string]bool{}       // users with an attempt whose outcome is unknown
	ackedBy := map[string]map[string]bool{} // order id -> users it was acknowledged to
	userOrders := map[string]map[string]bool{}
	for i := range recs {
		r := &recs[i]
		users[r.User] = true
		if unknownOutcome(r.Outcome) {
			unknownUsers[r.User] = true
		}
		if acked(r.Outcome) {
			if ackedBy[r.OrderID] == nil {
				ackedBy[r.OrderID] = map[string]bool{}
			}
			ackedBy[r.OrderID][r.User] = true
			if userOrders[r.User] == nil {
				userOrders[r.User] = map[string]bool{}
			}
			userOrders[r.User][r.OrderID] = true
		}
	}
	ackedN := len(ackedBy)
	expected := min(S, len(users))
	sr.Successes = ackedN
	sr.DistinctUsers = len(users)

	item, err := cl.getItem(ctx, sr.ItemID)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	sr.Final = item

	// Server-side view of the orders.
	var dbOrders []DBOrder
	var dbItem DBItem
	haveDB := cfg.Store != nil
	if haveDB {
		if dbOrders, err = cfg.Store.Orders(ctx, sr.ItemID); err != nil {
			return fmt.Errorf("verify: db orders: %w", err)
		}
		if dbItem, err = cfg.Store.Item(ctx, sr.ItemID); err != nil {
			return fmt.Errorf("verify: db item: %w", err)
		}
		sr.DBChecked = true
	}
	serverOrders, serverSrc := item.Sold, "admin API sold"
	if haveDB {
		serverOrders, serverSrc = len(dbOrders), "orders table"
	}

	// Every acknowledged order through the public API.
	apiMissing, apiWrong := lookupAcked(ctx, cfg, cl, sr.ItemID, ackedBy)

	var invs []Invariant
	add := func(name string, pass bool, format string, args ...any) {
		invs = append(invs, Invariant{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}

	// (1) successful orders == min(S, distinct users), never > S.
	{
		var probs []string
		if ackedN > S {
			probs = append(probs, fmt.Sprintf("OVERSOLD: %d orders acknowledged for stock %d", ackedN, S))
		}
		if serverOrders > S {
			probs = append(probs, fmt.Sprintf("OVERSOLD: %s = %d for stock %d", serverSrc, serverOrders, S))
		}
		if serverOrders != expected {
			probs = append(probs, fmt.Sprintf("%s = %d, want min(stock %d, users %d) = %d", serverSrc, serverOrders, S, len(users), expected))
		}
		if len(unknownUsers) == 0 && ackedN != expected {
			probs = append(probs, fmt.Sprintf("%d orders acknowledged, want %d (no request had an unknown outcome)", ackedN, expected))
		}
		if len(unknownUsers) > 0 && ackedN < expected-len(unknownUsers) {
			probs = append(probs, fmt.Sprintf("%d orders acknowledged, want at least %d", ackedN, expected-len(unknownUsers)))
		}
		if len(probs) == 0 {
			add("1 sold == min(stock, users), never > stock", true, "acknowledged %d, %s %d, stock %d, distinct users %d", ackedN, serverSrc, serverOrders, S, len(users))
		} else {
			add("1 sold == min(stock, users), never > stock", false, "%s", strings.Join(probs, "; "))
		}
	}

	// (2) no user has two orders.
	{
		var dupClient, dupDB []string
		for u, ids := range userOrders {
			if len(ids) > 1 {
				dupClient = append(dupClient, fmt.Sprintf("%s got %d order ids", u, len(ids)))
			}
		}
		if haveDB {
			per := map[string]int{}
			for _, o := range dbOrders {
				per[o.UserID]++
			}
			for u, n := range per {
				if n > 1 {
					dupDB = append(dupDB, fmt.Sprintf("%s has %d rows", u, n))
				}
			}
		}
		switch {
		case len(dupClient) > 0 || len(dupDB) > 0:
			add("2 one order per user", false, "acknowledged: [%s] db: [%s]", listSome(dupClient), listSome(dupDB))
		case haveDB:
			add("2 one order per user", true, "%d users with an acknowledged order, %d order rows, no duplicates", len(userOrders), len(dbOrders))
		default:
			add("2 one order per user", true, "%d users with an acknowledged order, each with one order id (client side; no DB)", len(userOrders))
		}
	}

	// (3a) every acknowledged order exists (API, and DB when given).
	{
		var probs []string
		for id, us := range ackedBy {
			if len(us) > 1 {
				probs = append(probs, fmt.Sprintf("order %s acknowledged to %d different users", id, len(us)))
			}
		}
		if len(apiMissing) > 0 {
			probs = append(probs, fmt.Sprintf("GET /orders/{id} lacks %d acknowledged orders: %s", len(apiMissing), listSome(apiMissing)))
		}
		if len(apiWrong) > 0 {
			probs = append(probs, fmt.Sprintf("%d acknowledged orders look wrong via GET: %s", len(apiWrong), listSome(apiWrong)))
		}
		if haveDB {
			inDB := map[string]DBOrder{}
			for _, o := range dbOrders {
				inDB[o.ID] = o
			}
			var missing, wrong []string
			for id, us := range ackedBy {
				o, ok := inDB[id]
				if !ok {
					missing = append(missing, id)
					continue
				}
				if !us[o.UserID] || o.Status != "created" {
					wrong = append(wrong, fmt.Sprintf("%s (user %s, status %s)", id, o.UserID, o.Status))
				}
			}
			if len(missing) > 0 {
				probs = append(probs, fmt.Sprintf("orders table lacks %d acknowledged orders: %s", len(missing), listSome(missing)))
			}
			if len(wrong) > 0 {
				probs = append(probs, fmt.Sprintf("%d acknowledged orders have another user or a non-created status in the DB: %s", len(wrong), listSome(wrong)))
			}
		}
		if sr.Drain.StillPending > 0 {
			probs = append(probs, fmt.Sprintf("%d accepted orders still pending after the %s drain", sr.Drain.StillPending, cfg.DrainTimeout))
		}
		where := "GET /api/v1/orders/{id}"
		if haveDB {
			where += " and the orders table"
		}
		if len(probs) == 0 {
			add("3a every acknowledged order is persisted", true, "%d acknowledged orders found via %s", ackedN, where)
		} else {
			add("3a every acknowledged order is persisted", false, "%s", strings.Join(probs, "; "))
		}
	}

	// (3b) no order without an acknowledgement, except for users whose
	// outcome the client could not know.
	if haveDB {
		var orphans []string
		excused := 0
		for _, o := range dbOrders {
			if ackedBy[o.ID] != nil {
				continue
			}
			if unknownUsers[o.UserID] {
				excused++
				continue
			}
			orphans = append(orphans, fmt.Sprintf("%s (user %s)", o.ID, o.UserID))
		}
		if len(orphans) == 0 {
			add("3b no order without a 2xx", true, "%d order rows, each acknowledged or (%d) for a user whose outcome was unknown", len(dbOrders), excused)
		} else {
			add("3b no order without a 2xx", false, "%d order rows were never acknowledged: %s", len(orphans), listSome(orphans))
		}
	} else {
		invs = append(invs, Invariant{Name: "3b no order without a 2xx", Skipped: true, Detail: "needs direct DB access (-dsn or -sqlite)"})
	}

	// (4) idempotent replays returned the same answer.
	{
		checked, unknown := 0, 0
		var probs []string
		for i := range recs {
			r := &recs[i]
			if r.ReplayOf < 0 {
				continue
			}
			o := findSeq(recs, r.ReplayOf)
			if o == nil || unknownOutcome(o.Outcome) || unknownOutcome(r.Outcome) {
				unknown++
				continue
			}
			checked++
			switch {
			case acked(o.Outcome) && !acked(r.Outcome):
				probs = append(probs, fmt.Sprintf("seq %d: original got order %s, replay got %d %s", r.Seq, o.OrderID, r.Status, r.Code))
			case acked(o.Outcome) && r.OrderID != o.OrderID:
				probs = append(probs, fmt.Sprintf("seq %d: original got order %s, replay got order %s", r.Seq, o.OrderID, r.OrderID))
			case definiteRefusal(o.Outcome) && acked(r.Outcome):
				probs = append(probs, fmt.Sprintf("seq %d: original was refused (%s), replay got order %s", r.Seq, o.Outcome, r.OrderID))
			}
		}
		if len(probs) == 0 {
			add("4 idempotent replays return the same answer", true, "%d replays checked, %d with an unknown outcome on either side", checked, unknown)
		} else {
			add("4 idempotent replays return the same answer", false, "%d of %d replays differ: %s", len(probs), checked, listSome(probs))
		}
	}

	// (5) sold == orders and remaining == stock - sold.
	{
		var probs []string
		if item.Stock != S {
			probs = append(probs, fmt.Sprintf("stock = %d, created with %d", item.Stock, S))
		}
		if item.Remaining != item.Stock-item.Sold {
			probs = append(probs, fmt.Sprintf("remaining %d != stock %d - sold %d", item.Remaining, item.Stock, item.Sold))
		}
		if haveDB {
			if item.Sold != len(dbOrders) {
				probs = append(probs, fmt.Sprintf("admin sold %d != %d order rows", item.Sold, len(dbOrders)))
			}
			if dbItem.Sold != len(dbOrders) {
				probs = append(probs, fmt.Sprintf("items.sold %d != %d order rows", dbItem.Sold, len(dbOrders)))
			}
			if dbItem.Stock != S {
				probs = append(probs, fmt.Sprintf("items.stock %d, created with %d", dbItem.Stock, S))
			}
		} else {
			lo, hi := ackedN, ackedN+len(unknownUsers)
			if item.Sold < lo || item.Sold > hi {
				if lo == hi {
					probs = append(probs, fmt.Sprintf("sold %d != %d acknowledged orders", item.Sold, lo))
				} else {
					probs = append(probs, fmt.Sprintf("sold %d outside [%d acknowledged, +%d users with unknown outcome]", item.Sold, lo, hi-lo))
				}
			}
		}
		if len(probs) == 0 {
			add("5 sold == orders, remaining == stock - sold", true, "stock %d sold %d remaining %d", item.Stock, item.Sold, item.Remaining)
		} else {
			add("5 sold == orders, remaining == stock - sold", false, "%s", strings.Join(probs, "; "))
		}
	}

	invs = append(invs, verifyEvents(ctx, cfg, cl, sr.ItemID, ackedBy, apiMissing, dbOrders, haveDB))

	sr.Invariants = invs
	sr.Pass = true
	for _, inv := range invs {
		if !inv.Pass && !inv.Skipped {
			sr.Pass = false
		}
	}
	if sr.Attempts == 0 {
		sr.Invariants = append(sr.Invariants, Invariant{Name: "load sent", Pass: false, Detail: "no attempt was sent"})
		sr.Pass = false
	}
	return nil
}

func findSeq(recs []Record, seq int) *Record {
	i := sort.Search(len(recs), func(i int) bool { return recs[i].Seq >= seq })
	if i < len(recs) && recs[i].Seq == seq {
		return &recs[i]
	}
	return nil
}

// lookupAcked fetches every acknowledged order through GET /api/v1/orders/{id}.
func lookupAcked(ctx context.Context, cfg Config, cl *client, itemID int64, ackedBy map[string]map[string]bool) (missing, wrong []string) {
	work := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, max(len(ackedBy), 1)) {
		wg.Go(func() {
			for id := range work {
				rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
				o, err := cl.getOrder(rctx, id)
				cancel()
				mu.Lock()
				switch {
				case err == errNotFound:
					missing = append(missing, id)
				case err != nil:
					wrong = append(wrong, fmt.Sprintf("%s (%v)", id, err))
				case o.ID != id || o.ItemID != itemID || !ackedBy[id][o.UserID] || o.Status != "created":
					wrong = append(wrong, fmt.Sprintf("%s (item %d user %s status %s)", id, o.ItemID, o.UserID, o.Status))
				}
				mu.Unlock()
			}
		})
	}
	for id := range ackedBy {
		work <- id
	}
	close(work)
	wg.Wait()
	return missing, wrong
}
