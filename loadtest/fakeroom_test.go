package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
	"github.com/seckill/seckill/internal/room"
)

// roomBugs selects deliberate defects of the fake waiting room.
type roomBugs struct {
	noPassCheck bool // orders need no pass
	lyingDraw   bool // the draw document lists the served tickets in reverse
	neverClose  bool // the room stays open (tickets read waiting) after the sell-out
	rateFactor  int  // admit this many times R a second (0: 1)
	extraPasses int  // allow this many live passes beyond the remaining stock
}

// fakeRooms adds the waiting room of docs/API.md to the fake shop, on the
// rules of internal/room (tickets, draw, admission, passes) over an
// in-process Redis, with an admission loop per room. It checks the
// harness, not the service: the proof tests run the real one.
type fakeRooms struct {
	f    *fakeService
	bugs roomBugs
	rdb  *redis.Client
	key  room.PassKey

	mu    sync.Mutex
	rooms map[int64]*fakeRoom
	wg    sync.WaitGroup
	stop  chan struct{}
}

type fakeRoom struct {
	r          *room.Room
	seed       room.Seed
	startsAt   time.Time
	rate, ttl  int
	commitment string
}

func newRoomFake(t *testing.T, bugs roomBugs) (*fakeService, *httptest.Server) {
	t.Helper()
	m, err := embedredis.Start()
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(m.URL())
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRooms{f: newFakeService(fakeBugs{}), bugs: bugs, rdb: redis.NewClient(opt), key: room.GeneratePassKey(),
		rooms: map[int64]*fakeRoom{}, stop: make(chan struct{})}
	f := fr.f
	srv := serveFake(t, f, map[string]http.HandlerFunc{
		"POST /api/v1/admin/items":              f.admin(fr.createItem),
		"GET /api/v1/admin/items/{id}":          f.admin(fr.adminItem),
		"GET /api/v1/items/{id}":                fr.publicItem,
		"POST /api/v1/items/{id}/queue":         fr.join,
		"GET /api/v1/items/{id}/queue/{ticket}": fr.status,
		"GET /api/v1/items/{id}/draw":           fr.draw,
		"POST /api/v1/items/{id}/orders":        fr.placeOrder,
	})
	t.Cleanup(func() { // after serveFake's cleanup: the server is closed
		close(fr.stop)
		fr.wg.Wait()
		_ = fr.rdb.Close()
		m.Close()
	})
	return f, srv
}

func (fr *fakeRooms) get(r *http.Request) *fakeRoom {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.rooms[id]
}

// record runs h and returns its answer.
func record(h http.HandlerFunc, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h(rec, r)
	return rec
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (fr *fakeRooms) createItem(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		StartsAt    time.Time `json:"starts_at"`
		WaitingRoom *struct {
			AdmitPerSecond int `json:"admit_per_second"`
			PassTTLSeconds int `json:"pass_ttl_seconds"`
		} `json:"waiting_room"`
	}
	_ = json.Unmarshal(body, &req)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := record(fr.f.createItem, r)
	if rec.Code != http.StatusCreated || req.WaitingRoom == nil {
		copyResponse(w, rec)
		return
	}
	var it struct{ ID int64 }
	_ = json.Unmarshal(rec.Body.Bytes(), &it)
	rm, err := room.New(fr.rdb, it.ID, &room.Options{PassKey: fr.key, KeyPrefix: "fake"})
	seed := room.NewSeed()
	if err == nil {
		err = rm.Setup(r.Context(), seed.Commitment(), time.Duration(req.WaitingRoom.PassTTLSeconds)*time.Second)
	}
	if err != nil {
		writeJSON(w, 500, errBody(err.Error()))
		return
	}
	fr.mu.Lock()
	fr.rooms[it.ID] = &fakeRoom{r: rm, seed: seed, startsAt: req.StartsAt, rate: req.WaitingRoom.AdmitPerSecond,
		ttl: req.WaitingRoom.PassTTLSeconds, commitment: seed.Commitment()}
	fr.mu.Unlock()
	fr.wg.Go(func() { fr.admit(it.ID) })
	copyResponse(w, rec)
}

// admit is the room's admission loop: open at starts_at, admit every
// 20 ms with at most the remaining stock live, close at the sell-out. As
// the service's loop does, each round takes a mark on the room's Redis
// clock before it reads the remaining stock (room.Mark): orders and their
// Consume run concurrently with it, unlocked.
func (fr *fakeRooms) admit(id int64) {
	fr.mu.Lock()
	rm := fr.rooms[id]
	fr.mu.Unlock()
	ctx := context.Background()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	opened := false
	for {
		select {
		case <-fr.stop:
			return
		case now := <-t.C:
			if now.Before(rm.startsAt) {
				continue
			}
			if !opened {
				opened = rm.r.Open(ctx, rm.seed) == nil
			}
			mark, err := rm.r.Mark(ctx)
			if err != nil {
				continue
			}
			fr.f.mu.Lock()
			it := fr.f.items[id]
			remaining := it.stock - it.sold
			fr.f.mu.Unlock()
			if remaining <= 0 {
				if !fr.bugs.neverClose {
					_ = rm.r.Close(ctx)
				}
			} else {
				_, _ = rm.r.Admit(ctx, now, mark, rm.rate*max(fr.bugs.rateFactor, 1), remaining+fr.bugs.extraPasses)
			}
		}
	}
}

func (fr *fakeRooms) view(ctx context.Context, rm *fakeRoom) (map[string]any, room.Stats) {
	st, _ := rm.r.Stats(ctx)
	phase := "pre"
	switch {
	case st.Closed:
		phase = "closed"
	case st.Phase == "open":
		phase = "open"
	}
	return map[string]any{"admit_per_second": rm.rate, "pass_ttl_seconds": rm.ttl, "lottery": true,
		"commitment": rm.commitment, "phase": phase, "paused": false}, st
}

func (fr *fakeRooms) adminItem(w http.ResponseWriter, r *http.Request) {
	rec := record(fr.f.getItem, r)
	rm := fr.get(r)
	if rm == nil || rec.Code != http.StatusOK {
		copyResponse(w, rec)
		return
	}
	var it map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &it)
	v, st := fr.view(r.Context(), rm)
	v["closed"], v["tickets"], v["waiting"], v["admitted"] = st.Closed, st.Tickets, st.Waiting, st.Admitted
	v["used"], v["expired"], v["live"] = st.Used, st.Expired, st.Live
	it["waiting_room"] = v
	writeJSON(w, 200, it)
}

func (fr *fakeRooms) publicItem(w http.ResponseWriter, r *http.Request) {
	rm := fr.get(r)
	if rm == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	v, _ := fr.view(r.Context(), rm)
	writeJSON(w, 200, map[string]any{"id": r.PathValue("id"), "waiting_room": v})
}

func (fr *fakeRooms) ticketJSON(w http.ResponseWriter, st room.Status) {
	poll := 1000
	if st.Position > 1000 {
		poll = 2000
	}
	out := map[string]any{"ticket": strconv.FormatInt(st.Ticket, 10), "number": st.Ticket, "state": st.State,
		"drawn": st.Drawn, "position": st.Position, "ahead": st.Ahead, "eta_seconds": st.ETASeconds}
	switch st.State {
	case room.StateAdmitted:
		out["pass"], out["pass_expires_at"] = st.Pass, st.PassExpiry.UTC().Format(time.RFC3339Nano)
	case room.StateUsed, room.StateExpired, room.StateSoldOut:
		poll = 0
	}
	if fr.bugs.neverClose && st.State == room.StateSoldOut {
		out["state"], poll = room.StateWaiting, 1000
	}
	out["poll_after_ms"] = poll
	writeJSON(w, 200, out)
}

func (fr *fakeRooms) join(w http.ResponseWriter, r *http.Request) {
	rm := fr.get(r)
	var req struct {
		UserID string `json:"user_id"`
	}
	if rm == nil || json.NewDecoder(r.Body).Decode(&req) != nil || req.UserID == "" {
		writeJSON(w, 400, errBody("invalid_request"))
		return
	}
	st, err := rm.r.Join(r.Context(), req.UserID, time.Now())
	switch {
	case errors.Is(err, room.ErrSoldOut) && !fr.bugs.neverClose:
		writeJSON(w, 409, errBody("sold_out"))
	case err != nil:
		writeJSON(w, 503, errBody("unavailable"))
	default:
		fr.ticketJSON(w, st)
	}
}

func (fr *fakeRooms) status(w http.ResponseWriter, r *http.Request) {
	rm := fr.get(r)
	n, _ := strconv.ParseInt(r.PathValue("ticket"), 10, 64)
	if rm == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	st, err := rm.r.Status(r.Context(), n, time.Now())
	switch {
	case errors.Is(err, room.ErrUnknownTicket):
		writeJSON(w, 404, errBody("not_found"))
	case err != nil:
		writeJSON(w, 503, errBody("unavailable"))
	default:
		fr.ticketJSON(w, st)
	}
}

func (fr *fakeRooms) draw(w http.ResponseWriter, r *http.Request) {
	rm := fr.get(r)
	if rm == nil {
		writeJSON(w, 404, errBody("not_found"))
		return
	}
	d, err := rm.r.Draw(r.Context())
	if err != nil {
		writeJSON(w, 503, errBody("unavailable"))
		return
	}
	if fr.bugs.lyingDraw {
		slices.Reverse(d.Served)
	}
	writeJSON(w, 200, d)
}

var passCodes = []struct {
	err  error
	code string
}{
	{room.ErrPassMissing, "pass_required"}, {room.ErrPassForged, "pass_invalid"}, {room.ErrPassExpired, "pass_expired"},
	{room.ErrPassWrongUser, "pass_wrong_user"}, {room.ErrPassWrongItem, "pass_wrong_item"},
}

// placeOrder checks the pass first, then takes the order as the fake shop
// does, and marks the pass used when the order was taken.
func (fr *fakeRooms) placeOrder(w http.ResponseWriter, r *http.Request) {
	rm := fr.get(r)
	if rm == nil {
		fr.f.placeOrder(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(body, &req)
	r.Body = io.NopCloser(bytes.NewReader(body))
	p, err := fr.key.Verify(r.Header.Get("Seckill-Pass"), rm.r.ItemID(), req.UserID, time.Now())
	if err != nil && !fr.bugs.noPassCheck {
		for _, c := range passCodes {
			if errors.Is(err, c.err) {
				writeJSON(w, 403, errBody(c.code))
				return
			}
		}
		writeJSON(w, 403, errBody("pass_invalid"))
		return
	}
	rec := record(fr.f.placeOrder, r)
	if rec.Code/100 == 2 && err == nil {
		_ = rm.r.Consume(r.Context(), p.Ticket, time.Now())
	}
	copyResponse(w, rec)
}
