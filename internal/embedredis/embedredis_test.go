package embedredis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/embedredis"
)

// Another local process that finds the port must not be able to read or
// rewrite the gate: without the password every command is refused.
func TestClientsNeedThePassword(t *testing.T) {
	s, err := embedredis.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	stranger := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer stranger.Close()
	if err := stranger.Set(ctx, "seckill:{item:1}:meta", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("SET without the password: got %v, want NOAUTH", err)
	}
	guess := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "seckill", MaxRetries: -1})
	defer guess.Close()
	if err := guess.Ping(ctx).Err(); err == nil {
		t.Error("PING with a wrong password: got no error, want a refusal")
	}

	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	owner := redis.NewClient(opt)
	defer owner.Close()
	if err := owner.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET with the URL's password: %v", err)
	}
	if v, _ := s.Get("k"); v != "v" {
		t.Errorf("value written by the owner: got %q, want v", v)
	}
}
