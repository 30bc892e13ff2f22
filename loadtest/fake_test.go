package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/loadtest/harness"
)

// fakeBugs selects deliberate defects of the fake service.
type fakeBugs struct {
	oversellBy    int  // sell this many units beyond the stock
	loseAckedNth  int  // the n-th successful order (1-based) is answered 201 but never stored
	doubleUser    bool // a user's second attempt with a new key gets a second order
	ignoreKeys    bool // Idempotency-Key is not honoured: a replay is a new attempt
	phantomNth    int  // the n-th successful order is stored but answered 409 sold_out
	async         bool // answer 202 pending and persist after asyncDelay
	asyncDelay    time.Duration
	asyncLoseNth  int  // with async: the n-th accepted order is never persisted
	asyncStuckNth int  // with async: the n-th accepted order stays pending forever
	soldDriftBy   int  // the sold counter reported by the admin API is off by this much
	remainingLies bool // remaining reported as stock (not stock - sold)
	loseEventNth  int  // the n-th created event is never listed in the feed
	doubleEvent   bool // every created event is listed twice (a relay that re-publishes)
	// Not defects: conditions a correct service can show.
	dropNth    int           // the n-th successful order is stored, then the connection is cut (no answer)
	orderDelay time.Duration // every order attempt takes this long
}

type fakeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	OrderID string `json:"order_id"`
	ItemID  int64  `json:"item_id"`
	UserID  string `json:"user_id"`
	Status  string `json:"status"`
	Cursor  int64  `json:"cursor"`
}

type fakeOrder struct {
	ID, UserID, Status string
	ItemID             int64
}

type fakeItem struct {
	id                 int64
	name, strategy     string
	stock, sold, okSeq int
	byUser             map[string]string // user -> order id
	createdN           int               // created events so far (loseEventNth)
}

type idemEntry struct {
	user   string
	status int
	body   []byte
}

// fakeService implements the seckill HTTP contract in memory, optionally
// with defects. It also implements harness.Store to stand in for the DB.
type fakeService struct {
	token string
	bugs  fakeBugs

	mu     sync.Mutex
	nextID int64
	items  map[int64]*fakeItem
	orders map[string]*fakeOrder
	idem   map[string]idemEntry // item/key -> first answer
	events []fakeEvent          // the admin feed, in delivery order
	wg     sync.WaitGroup
}

func newFake(t *testing.T, bugs fakeBugs) (*fakeService, *httptest.Server) {
	t.Helper()
	f := newFakeService(bugs)
	return f, serveFake(t, f, nil)
}

func newFakeService(bugs fakeBugs) *fakeService {
	return &fakeService{token: "test-token", bugs: bugs, items: map[int64]*fakeItem{},
		orders: map[string]*fakeOrder{}, idem: map[string]idemEntry{}}
}

// serveFake serves f's routes, and the routes of more (which replace f's
// for the same pattern).
func serveFake(t *testing.T, f *fakeService, more map[string]http.HandlerFunc) *httptest.Server {
	t.Helper()
	routes := map[string]http.HandlerFunc{
		"GET /healthz": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]string{"status": "ok"})
		},
		"POST /api/v1/admin/items":       f.admin(f.createItem),
		"GET /api/v1/admin/items/{id}":   f.admin(f.getItem),
		"GET /api/v1/items/{id}":         f.getItem, // the public page: the harness reads only its status
		"POST /api/v1/items/{id}/orders": f.placeOrder,
		"GET /api/v1/orders/{id}":        f.getOrder,
		"GET /api/v1/admin/events":       f.admin(f.listEvents),
	}
	maps.Copy(routes, more)
	mux := http.NewServeMux()
	for p, h := range routes {
		mux.HandleFunc(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		f.wg.Wait()
	})
	return srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errBody(code string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": code}}
}

func (f *fakeService) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeJSON(w, 401, errBody("unauthorized"))
			return
		}
		h(w, r)
	}
}

func (f *fakeService) itemJSON(it *fakeItem) map[string]any {
	sold := it.sold + f.bugs.soldDriftBy
	rem := it.stock - sold
	if f.bugs.remainingLies {
		rem = it.stock
	}
	return map[string]any{"id": it.id, "name": it.name, "price_cents": 100, "stock": it.stock,
		"sold": sold, "remaining": rem, "strategy": it.strategy}
}

func (f *fakeService) createItem(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name     string `json:"name"`
		Stock    int    `json:"stock"`
		Strategy string `json:"strategy"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Stock < 0 {
		writeJSON(w, 400, errBody("invalid_request"))
		return
	}
	if req.Strategy == "" {
		req.Strategy = "lua"
	}
	f.mu.Lock()
	f.nextID++
	it := &fakeItem{id: f.nextID, name: req.Name, strategy: req.Strategy, stock: req.Stock, byUser: map[string]string{}}
	f.items[it.id] = it
	body := f.itemJSON(it)
	f.mu.Unlock()
	writeJSON(w, 201, body)
}

func (f *fakeService) getItem(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[id]
	if it == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	writeJSON(w, 200, f.itemJSON(it))
}

func (f *fakeService) placeOrder(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var req struct {
		UserID string `json:"user_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.UserID == "" {
		writeJSON(w, 400, errBody("invalid_request"))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[id]
	if it == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	ik := fmt.Sprintf("%d/%s", id, key)
	if key != "" && !f.bugs.ignoreKeys {
		if e, ok := f.idem[ik]; ok {
			if e.user != req.UserID {
				writeJSON(w, 422, errBody("idempotency_conflict"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.status)
			_, _ = w.Write(e.body)
			return
		}
	}
	if f.bugs.orderDelay > 0 {
		time.Sleep(f.bugs.orderDelay)
	}
	status, body := f.decide(it, req.UserID)
	b, _ := json.Marshal(body)
	if key != "" {
		f.idem[ik] = idemEntry{user: req.UserID, status: status, body: b}
	}
	if status == 201 && f.bugs.dropNth == it.okSeq {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // the order exists, the client never hears of it
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decide runs under f.mu.
func (f *fakeService) decide(it *fakeItem, user string) (int, any) {
	if _, ok := it.byUser[user]; ok && !f.bugs.doubleUser {
		return 409, errBody("already_purchased")
	}
	if it.sold >= it.stock+f.bugs.oversellBy {
		return 409, errBody("sold_out")
	}
	it.okSeq++
	o := &fakeOrder{ID: uuid.Must(uuid.NewV7()).String(), ItemID: it.id, UserID: user, Status: "created"}
	if f.bugs.phantomNth == it.okSeq {
		it.sold++
		it.byUser[user] = o.ID
		f.orders[o.ID] = o
		f.created(o)
		return 409, errBody("sold_out")
	}
	it.sold++
	it.byUser[user] = o.ID
	if f.bugs.loseAckedNth == it.okSeq {
		// counted (like a Redis decrement) and acknowledged, never stored
		return 201, map[string]any{"id": o.ID, "item_id": it.id, "user_id": user, "status": "created"}
	}
	if f.bugs.async {
		o.Status = "pending"
		f.orders[o.ID] = o
		lose := f.bugs.asyncLoseNth == it.okSeq
		if f.bugs.asyncStuckNth == it.okSeq {
			return 202, map[string]any{"id": o.ID, "status": "pending"}
		}
		f.wg.Go(func() {
			time.Sleep(f.bugs.asyncDelay)
			f.mu.Lock()
			defer f.mu.Unlock()
			if lose {
				delete(f.orders, o.ID)
				return
			}
			o.Status = "created"
			f.created(o)
		})
		return 202, map[string]any{"id": o.ID, "status": "pending"}
	}
	f.orders[o.ID] = o
	f.created(o)
	return 201, map[string]any{"id": o.ID, "item_id": it.id, "user_id": user, "status": "created", "created_at": time.Now()}
}

// created lists o's created event in the feed; under f.mu.
func (f *fakeService) created(o *fakeOrder) {
	it := f.items[o.ItemID]
	it.createdN++
	if f.bugs.loseEventNth == it.createdN {
		return
	}
	copies := 1
	if f.bugs.doubleEvent {
		copies = 2
	}
	id := uuid.Must(uuid.NewV7()).String()
	for range copies {
		f.events = append(f.events, fakeEvent{ID: id, Type: "created", OrderID: o.ID, ItemID: o.ItemID, UserID: o.UserID,
			Status: "created", Cursor: int64(len(f.events) + 1)})
	}
}

// listEvents is GET /api/v1/admin/events: ?after= a cursor, ?limit=.
func (f *fakeService) listEvents(w http.ResponseWriter, r *http.Request) {
	after, err1 := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	if err1 != nil || err2 != nil || after < 0 || limit < 1 || limit > 1000 {
		writeJSON(w, 400, errBody("invalid_request"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	page := []fakeEvent{}
	next := after
	for _, e := range f.events[min(int(after), len(f.events)):] {
		if len(page) == limit {
			break
		}
		page = append(page, e)
		next = e.Cursor
	}
	writeJSON(w, 200, map[string]any{"events": page, "next_after": next})
}

func (f *fakeService) getOrder(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.orders[r.PathValue("id")]
	if o == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	writeJSON(w, 200, map[string]any{"id": o.ID, "item_id": o.ItemID, "user_id": o.UserID, "status": o.Status})
}

// Orders and Item make the fake usable as harness.Store (the "database").
func (f *fakeService) Orders(_ context.Context, itemID int64) ([]harness.DBOrder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []harness.DBOrder
	for _, o := range f.orders {
		if o.ItemID == itemID {
			out = append(out, harness.DBOrder{ID: o.ID, UserID: o.UserID, Status: o.Status})
		}
	}
	return out, nil
}

func (f *fakeService) Item(_ context.Context, itemID int64) (harness.DBItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[itemID]
	if it == nil {
		return harness.DBItem{}, fmt.Errorf("no item %d", itemID)
	}
	return harness.DBItem{Stock: it.stock, Sold: it.sold}, nil
}
