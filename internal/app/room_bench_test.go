package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkRoomPoll compares a waiting ticket's status poll with /healthz,
// over the same HTTP client and service (embedded backends): issue 21 wants
// a poll to cost about what /healthz costs (docs/BENCHMARKS-room.md).
//
//	go test -run XXX -bench RoomPoll -benchtime 3s ./internal/app/
func BenchmarkRoomPoll(b *testing.B) {
	be := testenv.Embedded(b)
	c := startRoomApp(b, be)
	id := createRoomItem(b, c, 10, map[string]any{"admit_per_second": 1, "paused": true})
	joinRoom(b, c, id, "first") // the only one admitted, were it not paused
	tk := joinRoom(b, c, id, "poller")
	deadline := time.Now().Add(5 * time.Second)
	for ticketStatus(b, c, id, tk.Ticket).ETASeconds == -1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the loop's first tick records the rate
	}
	for _, bc := range []struct{ name, path string }{
		{"healthz", "/healthz"},
		{"status", roomPath(id, "/queue/"+tk.Ticket)},
		{"join", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(16) // enough clients to keep the service busy
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var status int
					if bc.path == "" {
						r, err := c.Do("POST", roomPath(id, "/queue"), map[string]string{"user_id": "poller"}, false, nil)
						if err != nil {
							b.Fatal(err)
						}
						status = r.Status
					} else {
						r, err := c.Do("GET", bc.path, nil, false, nil)
						if err != nil {
							b.Fatal(err)
						}
						status = r.Status
					}
					if status != http.StatusOK {
						b.Fatalf("%s: %d", bc.name, status)
					}
				}
			})
		})
	}
}
