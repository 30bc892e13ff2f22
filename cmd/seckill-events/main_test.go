package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

func event(item int64, typ string) store.Event {
	return store.Event{ID: store.NewEventID(), Type: typ, OrderID: store.NewEventID(), ItemID: item,
		UserID: "u-" + typ, Status: typ, At: time.Now().UTC().Truncate(time.Microsecond)}
}

// lines parses the command's output: one event a line.
func lines(t *testing.T, out string) []store.Event {
	t.Helper()
	var evs []store.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func ids(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// Events published by the outbox's JetStream publisher come out of the
// command in order, filtered by item; a durable consumer acknowledges what
// it printed and, started again, goes on after it.
func TestConsumeFromJetStream(t *testing.T) {
	t.Parallel()
	addr := testenv.NATSAddr(t)
	sfx := testenv.Suffix()
	cfg := outbox.StreamConfig{Stream: "T_EV_" + sfx, SubjectPrefix: "tev" + sfx}
	ctx := context.Background()
	pub, err := outbox.Connect(ctx, "nats://"+addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pub.Close()
		if nc, err := nats.Connect("nats://" + addr); err == nil {
			js, _ := jetstream.New(nc)
			_ = js.DeleteStream(context.Background(), cfg.Stream)
			nc.Close()
		}
	})
	sent := []store.Event{event(1, "created"), event(2, "created"), event(1, "paid"), event(1, "cancelled")}
	for _, e := range sent {
		if err := pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// A redelivery of the first (a relay killed before its mark) is dropped by the server.
	if err := pub.Publish(ctx, sent[0]); err != nil {
		t.Fatal(err)
	}
	base := []string{"-nats", "nats://" + addr, "-stream", cfg.Stream, "-subject-prefix", cfg.SubjectPrefix}

	code, out, errs := runCmd(t, append(base, "-n", "4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got := lines(t, out)
	if strings.Join(ids(got), ",") != strings.Join(ids(sent), ",") {
		t.Fatalf("events %v, want %v in order", ids(got), ids(sent))
	}
	if got[2] != sent[2] {
		t.Errorf("event body %+v, want %+v", got[2], sent[2])
	}

	code, out, errs = runCmd(t, append(base, "-item", "1", "-n", "3")...)
	if want := []string{sent[0].ID, sent[2].ID, sent[3].ID}; code != 0 || strings.Join(ids(lines(t, out)), ",") != strings.Join(want, ",") {
		t.Fatalf("item 1: exit %d %s, events %v, want %v", code, errs, ids(lines(t, out)), want)
	}

	durable := append(base, "-durable", "ship-"+sfx)
	code, out, errs = runCmd(t, append(durable, "-n", "2")...)
	if code != 0 || strings.Join(ids(lines(t, out)), ",") != strings.Join(ids(sent[:2]), ",") {
		t.Fatalf("durable, first run: exit %d %s, events %v", code, errs, ids(lines(t, out)))
	}
	code, out, errs = runCmd(t, append(durable, "-n", "2")...)
	if code != 0 || strings.Join(ids(lines(t, out)), ",") != strings.Join(ids(sent[2:]), ",") {
		t.Fatalf("durable, second run: exit %d %s, events %v, want %v (after the acknowledged ones)", code, errs, ids(lines(t, out)), ids(sent[2:]))
	}
}

// The admin feed: the command pages with the cursor, prints the events
// without it, filters by item, and reports a refused token.
func TestTailAdminFeed(t *testing.T) {
	t.Parallel()
	evs := []store.Event{event(1, "created"), event(2, "created"), event(1, "paid")}
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/admin/events" || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"admin token required"}}`))
			return
		}
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		afters = append(afters, r.URL.Query().Get("after"))
		type ev struct {
			store.Event
			Cursor int64 `json:"cursor"`
		}
		page := struct {
			Events    []ev  `json:"events"`
			NextAfter int64 `json:"next_after"`
		}{Events: []ev{}, NextAfter: int64(after)}
		// Two a page, cursors 10, 20, 30.
		for i, e := range evs {
			if c := int64(10 * (i + 1)); c > int64(after) && len(page.Events) < 2 {
				page.Events = append(page.Events, ev{e, c})
				page.NextAfter = c
			}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)

	code, out, errs := runCmd(t, "-feed", srv.URL, "-token", "tok", "-n", "3", "-poll", "10ms")
	if code != 0 || strings.Join(ids(lines(t, out)), ",") != strings.Join(ids(evs), ",") {
		t.Fatalf("feed: exit %d %s, events %v, want %v", code, errs, ids(lines(t, out)), ids(evs))
	}
	if strings.Contains(out, "cursor") {
		t.Errorf("output %q carries the cursor; want the JetStream body", out)
	}
	if strings.Join(afters, ",") != "0,20" {
		t.Errorf("pages asked after %v, want 0,20", afters)
	}
	code, out, _ = runCmd(t, "-feed", srv.URL, "-token", "tok", "-item", "2", "-n", "1", "-poll", "10ms")
	if got := lines(t, out); code != 0 || len(got) != 1 || got[0].ID != evs[1].ID {
		t.Errorf("item 2: exit %d, events %v, want %s", code, ids(got), evs[1].ID)
	}
	if code, _, errs := runCmd(t, "-feed", srv.URL, "-token", "wrong"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("wrong token: exit %d %q, want 1 and the 401", code, errs)
	}
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"-nats", "x", "-feed", "y"}, {"-feed", "http://x"}, {"-nats", "x", "-durable", "d", "-new"}, {"-nats", "x", "extra"}, {"-nats", "x", "-n", "-1"}} {
		if code, _, errs := runCmd(t, args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d %q, want 2 and a message", args, code, errs)
		}
	}
}
