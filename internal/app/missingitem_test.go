package app_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

func TestMissingItemTTLSetting(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{"default", nil, nil, app.DefaultMissingItemTTL, ""},
		{"off", map[string]string{"SECKILL_MISSING_ITEM_TTL": "0"}, nil, 0, ""},
		{"flag wins", map[string]string{"SECKILL_MISSING_ITEM_TTL": "0"}, []string{"-missing-item-ttl", "250ms"}, 250 * time.Millisecond, ""},
		{"negative", map[string]string{"SECKILL_MISSING_ITEM_TTL": "-1s"}, nil, 0, "SECKILL_MISSING_ITEM_TTL=-1s: must be from 0 (off) to 1m0s"},
		{"too long", map[string]string{"SECKILL_MISSING_ITEM_TTL": "2m"}, nil, 0, "SECKILL_MISSING_ITEM_TTL=2m0s: must be from 0 (off) to 1m0s"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := app.ParseConfig(fs, tc.args, env(tc.env))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got error %v, want it to mention %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cfg.MissingItemTTL != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, cfg.MissingItemTTL, err, tc.want)
		}
	}
	if app.DefaultMissingItemTTL != time.Second {
		t.Errorf("DefaultMissingItemTTL: got %s, want 1s", app.DefaultMissingItemTTL)
	}
}

// Through the HTTP API, with the cache on: an unknown id is a JSON 404 on
// the item's page and its orders, and an item created on this instance is
// served at once, even under an id just answered unknown.
func TestUnknownItemThenCreatedHere(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.MissingItemTTL = time.Second })
		first := c.CreateItem(t, 3, "lua")
		next := first.ID + 1
		for range 3 {
			r := c.Must(t, http.MethodGet, fmt.Sprintf("/api/v1/items/%d", next), nil, false, nil)
			if r.Status != http.StatusNotFound || r.ErrorCode() != "not_found" {
				t.Fatalf("GET unknown item %d: got %d %s, want 404 not_found", next, r.Status, r.Body)
			}
			if r, err := c.PlaceOrder(next, "mallory", ""); err != nil || r.Status != http.StatusNotFound || r.ErrorCode() != "not_found" {
				t.Fatalf("order of unknown item %d: got %d %s %v, want 404 not_found", next, r.Status, r.Body, err)
			}
		}
		it := c.CreateItem(t, 3, "lua")
		if r := c.Must(t, http.MethodGet, fmt.Sprintf("/api/v1/items/%d", it.ID), nil, false, nil); r.Status != http.StatusOK {
			t.Errorf("GET of the item just created (id %d): got %d %s, want 200 at once", it.ID, r.Status, r.Body)
		}
		if r, err := c.PlaceOrder(it.ID, "alice", ""); err != nil || r.Status != http.StatusCreated {
			t.Errorf("order of the item just created (id %d): got %d %s %v, want 201", it.ID, r.Status, r.Body, err)
		}
	})
}
