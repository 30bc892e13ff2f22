package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// The optional human check of a join (issue 33): a Turnstile- or
// hCaptcha-style widget on the sale page gives the buyer a token, the join
// carries it as "human": {"token": "..."}, and the service asks the
// provider's verify endpoint, server-side, whether it is good. Both
// providers take the same form (secret, response, remoteip) and answer
// JSON with "success".

// HumanCheck checks a join's token for a client address; nil: admitted.
// Config.HumanCheck nil: off.
type HumanCheck func(ctx context.Context, token, remoteIP string) error

var (
	// errHumanCheckFailed: the verifier says the token is not good, or the
	// join carries none (refuse mode).
	errHumanCheckFailed = errors.New("human check failed")
)

// HumanCheckConfig is a verifier's settings.
type HumanCheckConfig struct {
	URL, Secret string
	// Refuse: a failed check is refused (403 human_check_failed) and a
	// verifier that cannot answer is a 503; false: both are logged and the
	// join admitted.
	Refuse bool
	// Timeout bounds one verify call. Default DefaultHumanCheckTimeout.
	Timeout time.Duration
	Client  *http.Client // default: a client of its own
	Logger  *slog.Logger // default slog.Default()
}

// DefaultHumanCheckTimeout bounds a verify call: the providers answer in
// tens of milliseconds, and a join must not hang on one that does not.
const DefaultHumanCheckTimeout = 2 * time.Second

// NewHumanCheck is the check that cfg describes.
func NewHumanCheck(cfg HumanCheckConfig) HumanCheck {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHumanCheckTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(ctx context.Context, token, remoteIP string) error {
		err := verifyHuman(ctx, cfg, token, remoteIP)
		if err == nil || cfg.Refuse {
			return err
		}
		cfg.Logger.WarnContext(ctx, "human check failed (log only: admitted)", "remote_ip", remoteIP, "err", err)
		return nil
	}
}

// verifyHuman asks the verifier about token: nil when it says success,
// errHumanCheckFailed when it says not, ErrUnavailable when it cannot say.
func verifyHuman(ctx context.Context, cfg HumanCheckConfig, token, remoteIP string) error {
	if token == "" {
		return fmt.Errorf("%w: the join carries no human token", errHumanCheckFailed)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	form := url.Values{"secret": {cfg.Secret}, "response": {token}, "remoteip": {remoteIP}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("human check: %w: %w", stock.ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("human check: %w: %w", stock.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("human check: %w: the verifier answered %d", stock.ErrUnavailable, resp.StatusCode)
	}
	var got struct {
		Success *bool `json:"success"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&got); err != nil || got.Success == nil {
		return fmt.Errorf("human check: %w: the verifier's answer has no success field (%v)", stock.ErrUnavailable, err)
	}
	if !*got.Success {
		return fmt.Errorf("%w: the verifier refused the token", errHumanCheckFailed)
	}
	return nil
}
