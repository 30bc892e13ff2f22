package handler

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// ReconciliationJSON is the answer of a reconcile (also printed by
// `seckill reconcile -json`).
type ReconciliationJSON struct {
	Item     int64              `json:"item"`
	Strategy stock.StrategyName `json:"strategy"`
	Database struct {
		Stock        int64 `json:"stock"`
		Sold         int64 `json:"sold"`
		Orders       int64 `json:"orders"`
		FailedOrders int64 `json:"failed_orders"`
	} `json:"database"`
	Redis         *gateJSON `json:"redis,omitempty"`
	ExpectedTaken int64     `json:"expected_taken"`
	Drift         []string  `json:"drift"`
	Repaired      bool      `json:"repaired"`
	Note          string    `json:"note,omitempty"`
}

// gateJSON is an item's gate in Redis.
type gateJSON struct {
	GatePresent bool  `json:"gate_present"`
	Stock       int64 `json:"stock"`
	Taken       int64 `json:"taken"`
	SoldOutMark bool  `json:"sold_out_mark"`
	Buyers      int64 `json:"buyers"`
	Queued      int64 `json:"queued"`
	DeadLetters int64 `json:"dead_letters"`
	Reserved    int64 `json:"reserved"`
	Orphaned    int64 `json:"orphaned"`
}

// ReconciliationView is r as JSON.
func ReconciliationView(r *stock.Reconciliation) ReconciliationJSON {
	var v ReconciliationJSON
	v.Item, v.Strategy = r.ItemID, r.Strategy
	v.Database.Stock, v.Database.Sold, v.Database.Orders, v.Database.FailedOrders = r.Stock, r.Sold, r.Orders, r.FailedOrders
	if r.Gated {
		v.Redis = &gateJSON{r.GatePresent, r.GateStock, r.GateTaken, r.SoldOutMark, r.Buyers, r.Queued, r.DeadLetters, r.Reserved, r.Orphaned}
	}
	v.ExpectedTaken, v.Drift, v.Repaired, v.Note = r.ExpectedTaken, r.Drift, r.Repaired, r.Note
	if v.Drift == nil {
		v.Drift = []string{}
	}
	return v
}

// reconcile compares the item's Redis state with the database and repairs
// Redis when that is safe; ?dry_run=true only reports.
func (h *Handler) reconcile(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	dry, err := queryBool(c, "dry_run")
	if err != nil {
		h.writeError(c, err)
		return
	}
	r, err := h.shop.Reconcile(c.Request.Context(), id, !dry)
	if err != nil {
		h.writeError(c, err)
		return
	}
	if r.Repaired {
		h.audit(c, "reconcile", "item", id, "drift", r.Drift, "note", r.Note)
	}
	c.JSON(http.StatusOK, ReconciliationView(r))
}
