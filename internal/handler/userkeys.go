package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// The key set's defaults (UserKeysConfig).
const (
	DefaultUserKeysRefresh      = 10 * time.Minute
	DefaultUserKeysFetchTimeout = 5 * time.Second
	DefaultUserKeysWait         = 2 * time.Second
	DefaultUserKeysMinInterval  = 10 * time.Second
	// maxJWKSBytes caps a key set document: an identity provider's is a
	// few kilobytes, and a larger answer is garbage, not keys.
	maxJWKSBytes = 1 << 20
)

// UserKeysConfig is where an identity provider publishes its signing keys
// (a JWKS) and how often they are read.
type UserKeysConfig struct {
	// URL is the JWKS document's http(s) address. Required.
	URL string
	// Refresh is how often the set is read again. Default
	// DefaultUserKeysRefresh; after a failed read, MinInterval.
	Refresh time.Duration
	// FetchTimeout bounds one read of the document (connecting, waiting,
	// reading). Default DefaultUserKeysFetchTimeout.
	FetchTimeout time.Duration
	// Wait bounds how long a request with an unknown key id waits for the
	// read it caused (or joined). Default DefaultUserKeysWait.
	Wait time.Duration
	// MinInterval is the least time between two reads caused by unknown
	// key ids: a flood of made-up kids costs the provider one read per
	// interval per instance. Default DefaultUserKeysMinInterval.
	MinInterval time.Duration
	// Client makes the requests. Default a client of its own.
	Client *http.Client
	// Logger hears about failed reads. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of MinInterval. Default time.Now.
	Now func() time.Time
	// afterRead, when set, hears each read's outcome (tests wait on it).
	afterRead func(error)
}

// UserKeys is an identity provider's key set, kept in memory: read at
// start, again every Refresh, and when a token names a key id the set does
// not hold (the provider rotated), at most once per MinInterval. A read
// that fails (the provider down, slow past FetchTimeout, or serving
// garbage) keeps the keys held, so tokens of known keys still verify; a
// request never waits on the provider longer than Wait. Close stops it.
type UserKeys struct {
	cfg  UserKeysConfig
	keys *jwkset.MemoryJWKSet
	kf   keyfunc.Keyfunc
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	fly  chan struct{} // closed when the read in flight ends; nil: none
	last time.Time     // when the last read started
	ok   bool          // whether the last read succeeded
}

// NewUserKeys reads the key set once, within FetchTimeout, and starts the
// refreshes. A failed first read is logged, not returned: the service
// starts with an empty set (every token is refused as of an unknown key)
// and reads again every MinInterval until the provider answers, so an
// outage of the provider at a deployment does not stop the deployment.
func NewUserKeys(cfg UserKeysConfig) (*UserKeys, error) {
	if cfg.URL == "" {
		return nil, errors.New("user keys: no JWKS URL")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultUserKeysRefresh
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultUserKeysFetchTimeout
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultUserKeysWait
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultUserKeysMinInterval
	}
	if cfg.Client == nil {
		// No redirects: the key set is read from the configured address only.
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	u := &UserKeys{cfg: cfg, keys: jwkset.NewMemoryStorage()}
	u.ctx, u.stop = context.WithCancel(context.Background())
	// Keys may say what they are for: a key for encryption ("use": "enc")
	// never verifies a token.
	kf, err := keyfunc.New(keyfunc.Options{Ctx: u.ctx, Storage: refreshingStore{MemoryJWKSet: u.keys, u: u},
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		u.stop()
		return nil, fmt.Errorf("user keys: %w", err)
	}
	u.kf = kf
	if fly := u.start(false); fly != nil {
		<-fly
	}
	u.wg.Add(1)
	go u.loop()
	return u, nil
}

// Close stops the refreshes and waits for a read in flight to end.
func (u *UserKeys) Close() {
	// Under mu: a read starting now either is counted before the wait or
	// sees the set closed.
	u.mu.Lock()
	u.stop()
	u.mu.Unlock()
	u.wg.Wait()
}

// keyfunc finds a token's key, reading the set again for an unknown kid
// within ctx and Wait.
func (u *UserKeys) keyfunc(ctx context.Context) jwt.Keyfunc { return u.kf.KeyfuncCtx(ctx) }

// loop reads the set every Refresh, or every MinInterval while reads fail.
func (u *UserKeys) loop() {
	defer u.wg.Done()
	t := time.NewTimer(u.next())
	defer t.Stop()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-t.C:
		}
		if fly := u.start(false); fly != nil {
			select {
			case <-fly:
			case <-u.ctx.Done():
				return
			}
		}
		t.Reset(u.next())
	}
}

func (u *UserKeys) next() time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ok {
		return u.cfg.Refresh
	}
	return u.cfg.MinInterval
}

// start begins a read, or returns the one in flight; limited is a read for
// an unknown kid, refused (nil) within MinInterval of the last one.
func (u *UserKeys) start(limited bool) <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fly != nil {
		return u.fly
	}
	now := u.cfg.Now()
	if limited && !u.last.IsZero() && now.Sub(u.last) < u.cfg.MinInterval {
		return nil
	}
	if u.ctx.Err() != nil {
		return nil
	}
	u.last = now
	fly := make(chan struct{})
	u.fly = fly
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		// The read is the set's, not the request's that caused it: a
		// request that gives up does not cancel it for those waiting.
		err := u.read()
		u.mu.Lock()
		u.fly, u.ok = nil, err == nil
		u.mu.Unlock()
		close(fly)
		if err != nil {
			u.cfg.Logger.Error("user keys: JWKS not read; the keys held stay in use", "url", u.cfg.URL, "err", err)
		}
		if u.cfg.afterRead != nil {
			u.cfg.afterRead(err)
		}
	}()
	return fly
}

// awaitUnknown reads the set again for an unknown kid, unless a read
// started within MinInterval, and waits for it at most Wait.
func (u *UserKeys) awaitUnknown(ctx context.Context) {
	fly := u.start(true)
	if fly == nil {
		return
	}
	t := time.NewTimer(u.cfg.Wait)
	defer t.Stop()
	select {
	case <-fly:
	case <-t.C:
	case <-ctx.Done():
	}
}

// read fetches the document and replaces the set with its usable keys.
// Anything else (a failed request, a status other than 200, a document
// that is no JWKS or holds no usable signing key) keeps the set as it is.
func (u *UserKeys) read() error {
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("the document is over %d bytes", maxJWKSBytes)
	}
	var doc jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("not a JWKS: %w", err)
	}
	var keys []jwkset.JWK
	var skipped []error
	for _, m := range doc.Keys {
		// Public keys only: a symmetric ("oct") key in a published set
		// would let anyone who reads the set sign tokens.
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: false}, jwkset.JWKValidateOptions{})
		if err != nil {
			skipped = append(skipped, fmt.Errorf("kid %q: %w", m.KID, err))
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return errors.Join(append([]error{fmt.Errorf("no usable key among %d", len(doc.Keys))}, skipped...)...)
	}
	if len(skipped) > 0 {
		u.cfg.Logger.Warn("user keys: JWKS keys skipped", "url", u.cfg.URL, "err", errors.Join(skipped...))
	}
	return u.keys.KeyReplaceAll(ctx, keys)
}

// refreshingStore is the key set as keyfunc reads it: a kid it does not
// hold causes a read of the set (limited, bounded) and a second look.
type refreshingStore struct {
	*jwkset.MemoryJWKSet
	u *UserKeys
}

func (s refreshingStore) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	k, err := s.MemoryJWKSet.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return k, err
	}
	s.u.awaitUnknown(ctx)
	// Looked again even when no read started: one may just have ended.
	return s.MemoryJWKSet.KeyRead(ctx, kid)
}
