// Package harness is the core of the seckill load-test harness: it seeds items
// through the admin API, drives order traffic (closed or open loop), drains
// asynchronous orders, verifies the sale invariants and builds a report.
//
// The command in ../ (go run ./loadtest) is a thin wrapper around Run.
package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"
)

// Load modes.
const (
	ModeClosed = "closed" // C workers, each sends its next request when the previous one finished
	ModeOpen   = "open"   // requests are due at a fixed rate; latency is measured from the intended send time
	ModeRoom   = "room"   // simulated buyers go through the item's waiting room (see RoomConfig and RunRoom)
)

// Config describes one harness run. Zero values are replaced by the defaults
// documented on each field (see withDefaults).
type Config struct {
	BaseURL string // service base URL; must be a loopback address. Default URLs[0], else http://127.0.0.1:8080
	// URLs are the instances order attempts are spread over, round-robin
	// (each a loopback address). Admin calls (create item, verify), the
	// /healthz baseline and the drain's order reads go to BaseURL. Default
	// [BaseURL].
	URLs       []string
	AdminToken string   // bearer token for /api/v1/admin/*
	AdminURL   string   // the admin listener's base URL (SECKILL_ADMIN_ADDR); "" = BaseURL
	Strategies []string // one fresh item per strategy; "" means the server default. Default [""]

	Stock       int     // stock S of every item. Default 100
	Buckets     int     // buckets of every item (1 to 64, every strategy); 0 = the server's default, 1
	Attempts    int     // order attempts N per strategy, replays included. Default 2000
	Users       int     // size U of the user pool per strategy. Default 1000
	RepeatShare float64 // share of attempts made by a user who already attempted, with a fresh Idempotency-Key
	RetryShare  float64 // share of attempts that replay an earlier attempt (same key, same body)

	Mode        string        // ModeClosed (default), ModeOpen or ModeRoom (RunRoom)
	Concurrency int           // closed loop: workers; open loop: max requests in flight. Default 32
	Rate        float64       // open loop: intended requests per second. Default 500
	MaxDuration time.Duration // cap on the load phase per strategy. Default 60s (room: the opening's wait + 2×stock/R + 60s)

	RequestTimeout   time.Duration // per request. Default 10s
	DrainTimeout     time.Duration // how long to wait for pending (202) orders. Default 30s
	BaselineDuration time.Duration // /healthz baseline length; negative disables. Default 2s

	// Room describes the waiting room and its crowd in ModeRoom (Users
	// is then W, the users who join before the opening).
	Room RoomConfig

	Seed  uint64 // plan seed; 0 = derived from the clock
	RunID string // prefix of user ids and keys; default random

	// Store, when set, gives direct access to the service's database and
	// enables the DB-side checks (orders without an acknowledgement, sold
	// counter against the orders table).
	Store Store

	History       io.Writer     // JSONL record of every request, when set
	Progress      io.Writer     // live progress lines, when set
	ProgressTTY   bool          // rewrite one line with \r instead of printing new lines
	ProgressEvery time.Duration // default 1s
}

func (c Config) withDefaults() (Config, error) {
	if c.BaseURL == "" && len(c.URLs) > 0 {
		c.BaseURL = c.URLs[0]
	}
	if c.BaseURL == "" {
		c.BaseURL = "http://127.0.0.1:8080"
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if err := checkLoopback(c.BaseURL); err != nil {
		return c, err
	}
	if len(c.URLs) == 0 {
		c.URLs = []string{c.BaseURL}
	}
	urls := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		urls[i] = strings.TrimRight(u, "/")
		if err := checkLoopback(urls[i]); err != nil {
			return c, err
		}
	}
	c.URLs = urls
	c.AdminURL = strings.TrimRight(c.AdminURL, "/")
	if c.AdminURL != "" {
		if err := checkLoopback(c.AdminURL); err != nil {
			return c, err
		}
	}
	if len(c.Strategies) == 0 {
		c.Strategies = []string{""}
	}
	if c.Stock == 0 {
		c.Stock = 100
	}
	if c.Attempts == 0 {
		c.Attempts = 2000
	}
	if c.Users == 0 {
		c.Users = 1000
	}
	if c.Mode == "" {
		c.Mode = ModeClosed
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	if c.Rate == 0 {
		c.Rate = 500
	}
	roomCap := c.Mode == ModeRoom && c.MaxDuration == 0
	if c.MaxDuration == 0 {
		c.MaxDuration = 60 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.BaselineDuration == 0 {
		c.BaselineDuration = 2 * time.Second
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.RunID == "" {
		c.RunID = randomID()
	}
	switch {
	case c.Stock < 0:
		return c, errors.New("stock must be >= 0")
	case c.Attempts < 0:
		return c, errors.New("attempts must be >= 0")
	case c.Users < 1:
		return c, errors.New("users must be >= 1")
	case c.RepeatShare < 0 || c.RetryShare < 0 || c.RepeatShare+c.RetryShare > 1:
		return c, errors.New("repeat and retry shares must be >= 0 and sum to at most 1")
	case c.Mode != ModeClosed && c.Mode != ModeOpen && c.Mode != ModeRoom:
		return c, fmt.Errorf("unknown mode %q (want %s, %s or %s)", c.Mode, ModeClosed, ModeOpen, ModeRoom)
	case c.Concurrency < 1:
		return c, errors.New("concurrency must be >= 1")
	case c.Rate <= 0:
		return c, errors.New("rate must be > 0")
	}
	if c.Mode == ModeRoom {
		var err error
		if c.Room, err = c.Room.withDefaults(c.Users); err != nil {
			return c, err
		}
		if roomCap { // the wait for the opening, twice the sale at R, and a minute
			c.MaxDuration = c.Room.OpenIn + 2*time.Duration(c.Stock)*time.Second/time.Duration(c.Room.Rate) + time.Minute
		}
	}
	return c, nil
}

// checkLoopback refuses to send traffic anywhere but the local machine.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("base URL %q: scheme must be http or https", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("base URL %q: the harness only sends traffic to loopback addresses", base)
	}
	return nil
}
