package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// Against the real service relaying to the machine's NATS: every
// acknowledged order's created event reaches the consumer, each paired
// with its 2xx, on each strategy.
func TestEventLagPairsEveryOrder(t *testing.T) {
	addr := testenv.NATSAddr(t)
	_, c := apptest.Start(t, testenv.Real(t), func(cfg *app.Config) { cfg.NATSURL = "nats://" + addr })
	for _, strategy := range []string{"lua", "lock", "lua-async"} {
		t.Run(strategy, func(t *testing.T) {
			cfg := config{url: c.Base, token: c.Token, nats: "nats://" + addr, prefix: "seckill.orders", stream: "SECKILL_ORDERS",
				strategy: strategy, rate: 100, inflight: 16, duration: time.Second, wait: 30 * time.Second}
			if err := cfg.check(); err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			res, err := measure(context.Background(), cfg, &progress)
			if err != nil {
				t.Fatal(err)
			}
			if res.sent == 0 || res.acked != res.sent || res.failed != 0 || res.refused != 0 {
				t.Fatalf("sent %d, acknowledged %d, refused %d, failed %d; want every order acknowledged", res.sent, res.acked, res.refused, res.failed)
			}
			if res.missing != 0 || len(res.lags) != res.acked {
				t.Errorf("%d lags for %d acknowledged orders, %d missing; want one each", len(res.lags), res.acked, res.missing)
			}
			var out bytes.Buffer
			res.print(&out, cfg)
			if !strings.Contains(out.String(), "p50") || strings.Contains(out.String(), "MISSING") {
				t.Errorf("report %q", out.String())
			}
		})
	}
}

func TestEventLagRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "http://10.0.0.1:8080", "-token", "x"}, // not loopback
		{"-token", ""},
		{"-token", "x", "-strategy", "redis"},
		{"-token", "x", "-rate", "0"},
		{"-token", "x", "-duration", "1h"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d %q, want 2 and a message", args, code, errb.String())
		}
	}
}
