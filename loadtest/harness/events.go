package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// feedEvent is one order event of GET /api/v1/admin/events.
type feedEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	OrderID string `json:"order_id"`
	ItemID  int64  `json:"item_id"`
	UserID  string `json:"user_id"`
	Cursor  int64  `json:"cursor"`
}

// errNoFeed: the service has no event feed (a peer, an older seckill).
var errNoFeed = fmt.Errorf("no event feed")

// readEvents reads the feed from after to its end and returns the item's
// events and the last cursor.
func (c *client) readEvents(ctx context.Context, itemID, after int64) ([]feedEvent, int64, error) {
	var out []feedEvent
	for {
		status, body, err := c.do(ctx, http.MethodGet, "/api/v1/admin/events?limit=1000&after="+strconv.FormatInt(after, 10), nil, c.admin())
		if err != nil {
			return out, after, err
		}
		if status == http.StatusNotFound {
			return nil, after, errNoFeed
		}
		if status != http.StatusOK {
			return out, after, httpErr("GET /api/v1/admin/events", status, body)
		}
		var page struct {
			Events    []feedEvent `json:"events"`
			NextAfter int64       `json:"next_after"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return out, after, fmt.Errorf("GET /api/v1/admin/events: %w", err)
		}
		for _, e := range page.Events {
			if e.ItemID == itemID {
				out = append(out, e)
			}
		}
		if len(page.Events) == 0 || page.NextAfter <= after {
			return out, after, nil
		}
		after = page.NextAfter
	}
}

// verifyEvents is invariant 6: every acknowledged order has exactly one
// created event, no order has two events of one type, no event names an
// order the sale does not have, and (with the database) every paid order
// has its one paid event. The relay lags its commits a little: the feed is
// read again until every acknowledged order's created event is there, or
// cfg.DrainTimeout passes.
//
// Orders invariant 3a found missing (lost: no row, no event) are not
// waited for: that loss is 3a's verdict, and this one's too.
func verifyEvents(ctx context.Context, cfg Config, cl *client, itemID int64, ackedBy map[string]map[string]bool, lost []string, dbOrders []DBOrder, haveDB bool) Invariant {
	const name = "6 every order change is one event"
	isLost := map[string]bool{}
	for _, id := range lost {
		isLost[id] = true
	}
	var evs []feedEvent
	var after int64
	deadline := time.Now().Add(cfg.DrainTimeout)
	for {
		more, last, err := cl.readEvents(ctx, itemID, after)
		if err == errNoFeed {
			return Invariant{Name: name, Skipped: true, Detail: "the service has no event feed (GET /api/v1/admin/events is 404)"}
		}
		if err != nil {
			return Invariant{Name: name, Pass: false, Detail: err.Error()}
		}
		evs, after = append(evs, more...), last
		created := map[string]bool{}
		for _, e := range evs {
			if e.Type == "created" {
				created[e.OrderID] = true
			}
		}
		all := true
		for id := range ackedBy {
			all = all && (created[id] || isLost[id])
		}
		if all || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	known := map[string]bool{}
	for id := range ackedBy {
		known[id] = true
	}
	paid := map[string]bool{}
	for _, o := range dbOrders {
		known[o.ID] = true
		if o.Status == "paid" {
			paid[o.ID] = true
		}
	}
	perType := map[string]int{} // order id + " " + type -> count
	seen := map[string]bool{}
	var probs []string
	for _, e := range evs {
		if seen[e.ID] {
			probs = append(probs, fmt.Sprintf("event %s listed twice", e.ID))
		}
		seen[e.ID] = true
		perType[e.OrderID+" "+e.Type]++
		if haveDB && !known[e.OrderID] {
			probs = append(probs, fmt.Sprintf("event %s (%s) names order %s, which the sale does not have", e.ID, e.Type, e.OrderID))
		}
	}
	for k, n := range perType {
		if n > 1 {
			probs = append(probs, fmt.Sprintf("order %s has %d events", k, n))
		}
	}
	missing := 0
	for id := range ackedBy {
		if perType[id+" created"] == 0 {
			missing++
			if missing <= 5 {
				probs = append(probs, fmt.Sprintf("acknowledged order %s has no created event", id))
			}
		}
	}
	if missing > 5 {
		probs = append(probs, fmt.Sprintf("(%d acknowledged orders without a created event in all)", missing))
	}
	for id := range paid {
		if perType[id+" paid"] != 1 {
			probs = append(probs, fmt.Sprintf("paid order %s has %d paid events", id, perType[id+" paid"]))
		}
	}
	if len(probs) > 0 {
		return Invariant{Name: name, Pass: false, Detail: listSome(probs)}
	}
	return Invariant{Name: name, Pass: true, Detail: fmt.Sprintf("%d events of the item, one created event for each of the %d acknowledged orders, %d paid orders with one paid event each", len(evs), len(ackedBy), len(paid))}
}
