package app_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// Sybils (issue 33): with a real Redis, joins from one client address are
// limited by default (SECKILL_ROOM_RATE_IP, app.DefaultRoomRateIP): one
// address inventing user ids gets its burst of tickets, then 429
// rate_limited with Retry-After, and a refused join takes no place.
func TestRoomJoinsPerAddressLimitedByDefault(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	c := startRoomApp(t, b, func(cfg *app.Config) { cfg.RoomRateIP = "" }) // the default
	id := createRoomItem(t, c, 5, map[string]any{"admit_per_second": 1})
	const joins = 200
	ok, limited := 0, 0
	for i := range joins {
		r, err := c.Do("POST", roomPath(id, "/queue"), map[string]any{"user_id": fmt.Sprintf("bot-%d", i)}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Status == http.StatusOK:
			ok++
		case r.Status == http.StatusTooManyRequests && r.ErrorCode() == "rate_limited" && r.Header.Get("Retry-After") != "":
			limited++
		default:
			t.Fatalf("join %d: got %d %s, want 200 or 429 rate_limited with Retry-After", i, r.Status, r.Body)
		}
	}
	// The burst is 20 and the rate 10 a second: 200 joins in a row from
	// one address cannot all pass unless they took 18 s.
	if limited == 0 || ok < 20 {
		t.Fatalf("%d joins from one address: %d admitted, %d limited; want the burst (20) admitted and the rest limited", joins, ok, limited)
	}
	if v := roomAdminView(t, c, id); v.WaitingRoom == nil || v.WaitingRoom.Tickets != int64(ok) {
		t.Errorf("tickets %+v, want %d (refused joins take no place)", v.WaitingRoom, ok)
	}
}
