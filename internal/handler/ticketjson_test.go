package handler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
)

// The hand-written ticket renderer writes exactly what encoding/json writes.
func TestAppendTicketJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	opens := time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)
	expires := opens.Add(90*time.Second + 123*time.Millisecond)
	cases := []rooms.Ticket{
		{Ticket: "AQIDBAUGBwgJCgsMDQ4PEA-_", Number: 1, State: room.StateWaiting, ETASeconds: -1, Remaining: 100,
			OpensAt: &opens, PollAfterMS: 5000, Commitment: "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"},
		{Ticket: "t", Number: 1 << 40, State: room.StateWaiting, Drawn: true, Position: 12, Ahead: 11, ETASeconds: 3,
			Remaining: 0, PollAfterMS: 1000},
		{Ticket: "t", Number: 7, State: room.StateAdmitted, Drawn: true, ETASeconds: -1, Remaining: 3,
			Pass: "cGFzcw.c2ln", PassExpiresAt: &expires, OpensAt: &opens, PollAfterMS: 1000},
		{Ticket: "t", Number: 7, State: room.StateSoldOut, ETASeconds: -1, OpensAt: new(opens.In(time.FixedZone("X", 3600)))},
		{Ticket: "needs <escaping> & \"quotes\"", State: room.StateUsed},
		{Ticket: "t", State: "ünicode"},
		{Ticket: "t", State: room.StateWaiting, Commitment: "not <plain>"},
		{},
	}
	for _, v := range cases {
		want, err := json.Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		if got := marshalTicket(&v); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}
