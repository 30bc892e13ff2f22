package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/loadtest/harness"
)

// instance is one more front of a fake service (its state shared with the
// others), counting the order attempts it receives.
type instance struct {
	srv    *httptest.Server
	orders atomic.Int64
}

// instances serves h from n servers, as n instances of one service.
func instances(t *testing.T, n int, h func(i int, w http.ResponseWriter, r *http.Request)) []*instance {
	t.Helper()
	out := make([]*instance, n)
	for i := range out {
		in := &instance{}
		in.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/orders") {
				in.orders.Add(1)
			}
			h(i, w, r)
		}))
		t.Cleanup(in.srv.Close)
		out[i] = in
	}
	return out
}

// runOn runs the harness against the fake through the instances ins (its
// database checks too when withDB), and returns the report and its text.
func runOn(t *testing.T, f *fakeService, ins []*instance, withDB bool) (*harness.Report, string) {
	t.Helper()
	cfg := fakeConfig("", f.token)
	cfg.URLs = urlsOf(ins)
	if withDB {
		cfg.Store = f
	}
	rep, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	return rep, buf.String()
}

func urlsOf(ins []*instance) []string {
	var urls []string
	for _, in := range ins {
		urls = append(urls, in.srv.URL)
	}
	return urls
}

// TestOrdersSpreadOverEveryURL: three instances of one correct service;
// every instance gets a third of the attempts (round-robin), admin calls
// go to the first only, the per-instance counts add up, and it PASSes.
func TestOrdersSpreadOverEveryURL(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, fakeBugs{})
	var adminElsewhere atomic.Int64
	ins := instances(t, 3, func(i int, w http.ResponseWriter, r *http.Request) {
		if i > 0 && strings.HasPrefix(r.URL.Path, "/api/v1/admin/") {
			adminElsewhere.Add(1)
		}
		srv.Config.Handler.ServeHTTP(w, r)
	})
	rep, text := runOn(t, f, ins, true)
	t.Log("\n" + text)
	wantAllPass(t, rep)
	if rep.Config.BaseURL != ins[0].srv.URL {
		t.Errorf("base URL %s, want the first -url %s", rep.Config.BaseURL, ins[0].srv.URL)
	}
	if n := adminElsewhere.Load(); n != 0 {
		t.Errorf("%d admin calls reached instances other than the first", n)
	}
	perStrategy := rep.Config.Attempts / 3
	for i, in := range ins {
		if got, want := in.orders.Load(), int64(len(rep.Strategies)*perStrategy); got != want {
			t.Errorf("instance %d received %d order attempts, want %d (a third of each strategy's %d)", i, got, want, rep.Config.Attempts)
		}
	}
	for _, s := range rep.Strategies {
		if len(s.Instances) != 3 {
			t.Fatalf("strategy %s: %d instance counts, want 3", s.Strategy, len(s.Instances))
		}
		sum, acked := 0, 0
		for i, in := range s.Instances {
			if in.URL != ins[i].srv.URL || in.Attempts != perStrategy {
				t.Errorf("strategy %s: instance %d counted %+v, want %s with %d attempts", s.Strategy, i, in, ins[i].srv.URL, perStrategy)
			}
			sum += in.Attempts
			acked += in.Acked
		}
		if sum != s.Attempts || acked == 0 {
			t.Errorf("strategy %s: instance counts add up to %d attempts (%d acknowledged), want %d", s.Strategy, sum, acked, s.Attempts)
		}
	}
	if !strings.Contains(text, "instance 2 "+ins[2].srv.URL) {
		t.Errorf("the text report has no per-instance line")
	}
}

// TestLossyInstanceFails: one instance of three answers 201 without
// storing anything; the verdict must catch it, however well the other two
// behave.
func TestLossyInstanceFails(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, fakeBugs{})
	ins := instances(t, 3, func(i int, w http.ResponseWriter, r *http.Request) {
		if i == 2 && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/orders") {
			var req struct {
				UserID string `json:"user_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			writeJSON(w, http.StatusCreated, map[string]any{"id": uuid.Must(uuid.NewV7()).String(), "user_id": req.UserID, "status": "created"})
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	})
	for _, withDB := range []bool{false, true} {
		t.Run(fmt.Sprintf("db=%v", withDB), func(t *testing.T) {
			rep, _ := runOn(t, f, ins, withDB)
			if rep.Pass {
				t.Fatal("an instance that acknowledges orders it never stores passed")
			}
			wantVerdict(t, rep, "3a", "FAIL")
		})
	}
}

// TestCommandTakesSeveralURLs: -url repeats and takes commas; the JSON
// report counts attempts on each instance.
func TestCommandTakesSeveralURLs(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, fakeBugs{})
	ins := instances(t, 3, func(_ int, w http.ResponseWriter, r *http.Request) { srv.Config.Handler.ServeHTTP(w, r) })
	js := filepath.Join(t.TempDir(), "r.json")
	var out, errb bytes.Buffer
	args := []string{"-url", ins[0].srv.URL + "," + ins[1].srv.URL, "-url", ins[2].srv.URL, "-token", f.token,
		"-strategies", "lua", "-stock", "20", "-n", "300", "-users", "100", "-c", "8", "-baseline", "0", "-q", "-json", js}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep harness.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Config.URLs) != 3 || len(rep.Strategies) != 1 || len(rep.Strategies[0].Instances) != 3 {
		t.Fatalf("report: urls %v, strategies %d", rep.Config.URLs, len(rep.Strategies))
	}
	for i, in := range rep.Strategies[0].Instances {
		if in.URL != ins[i].srv.URL || in.Attempts != 100 || ins[i].orders.Load() != 100 {
			t.Errorf("instance %d: report %+v, server saw %d; want %s with 100", i, in, ins[i].orders.Load(), ins[i].srv.URL)
		}
	}
	for _, bad := range [][]string{{"-url", ins[0].srv.URL + ",", "-token", f.token}, {"-url", ins[0].srv.URL, "-url", "http://192.0.2.1:8080", "-token", f.token, "-q"}} {
		if code := run(bad, &out, &errb); code == 0 {
			t.Errorf("%v: exit 0, want an error", bad)
		}
	}
}

// TestItemUnknownElsewhereAtFirstIsWaitedFor: an instance learns of an item
// another one created only when it next reads the database (the service's
// missing-item memory, up to a second). The harness creates each item
// through the first instance and waits until every instance answers its
// page before the burst, as an admin creates a sale before it opens; it
// used to fire at once, and the other instances' 404s failed the replays.
func TestItemUnknownElsewhereAtFirstIsWaitedFor(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, fakeBugs{})
	var created atomic.Int64 // Unix nanoseconds of the last item's creation
	const unknownFor = 300 * time.Millisecond
	ins := instances(t, 3, func(i int, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/admin/items" {
			created.Store(time.Now().UnixNano())
		}
		if i > 0 && strings.HasPrefix(r.URL.Path, "/api/v1/items/") && time.Since(time.Unix(0, created.Load())) < unknownFor {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "not found"}})
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	})
	rep, text := runOn(t, f, ins, true)
	if !rep.Pass {
		t.Errorf("an item unknown to two instances for %v after its creation failed the run:\n%s", unknownFor, text)
	}
	if strings.Contains(text, " 404:") { // the status line: "status: 201:n 404:m ..."
		t.Errorf("orders met the instances' 404s:\n%s", text)
	}
}
