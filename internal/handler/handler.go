// Package handler is the HTTP API: it parses and validates requests, calls
// the domain, and maps domain errors to statuses in one table.
package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/stock"
)

// Shop is the domain the handler drives; *shop.Service implements it.
type Shop interface {
	CreateItem(ctx context.Context, in stock.NewItem) (*stock.Item, error)
	ListItems(ctx context.Context, f stock.ItemFilter) (*stock.ItemPage, error)
	Item(ctx context.Context, id int64) (*stock.Item, error)
	SetStock(ctx context.Context, id, n int64) (before, after *stock.Item, err error)
	PlaceOrder(ctx context.Context, req stock.OrderRequest) (*stock.Order, bool, error)
	KnownSoldOut(itemID int64) bool
	// KnownPurchased reports whether the user's attempt without an
	// Idempotency-Key would be refused from memory as already purchased
	// (see shop.PurchasedMaxAge).
	KnownPurchased(itemID int64, userID string) bool
	// ItemView is the public view of an item, served from memory (see
	// shop.ViewMaxAge for how stale it may be).
	ItemView(ctx context.Context, id int64) (*stock.ItemView, error)
	Order(ctx context.Context, id string) (*stock.Order, error)
	PayOrder(ctx context.Context, id, userID string) (*stock.Order, error)
	CancelOrder(ctx context.Context, id, userID string) (*stock.Order, error)
	Ready(ctx context.Context) error
	// The lua-async queue: per item, in all, and its dead letters.
	AsyncStats(ctx context.Context, id int64) (stock.AsyncStats, error)
	Backlog(ctx context.Context) (stock.AsyncStats, error)
	DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error)
	RequeueDeadLetters(ctx context.Context, id int64) (int, error)
	Reconcile(ctx context.Context, id int64, repair bool) (*stock.Reconciliation, error)
}

// Config tunes the handler.
type Config struct {
	// AdminToken is the bearer token of the admin routes. Required.
	AdminToken string
	// RequestTimeout bounds each request's work. Default 10s.
	RequestTimeout time.Duration
	// ReadyTimeout bounds /readyz's checks. Default 1s.
	ReadyTimeout time.Duration
	// Logger receives errors and the audit log. Default slog.Default().
	Logger *slog.Logger
	// Metrics records requests and rate-limit refusals and is served at
	// /metrics. Default nil: no metrics, no /metrics.
	Metrics *metrics.Metrics
	// UserLimit and IPLimit limit orders per user and per client address.
	// Default nil: off.
	UserLimit, IPLimit *ratelimit.Limiter
	// RoomIPLimit limits waiting-room joins per client address (nil: the
	// joins share IPLimit's budget, under their own keys).
	RoomIPLimit *ratelimit.Limiter
	// UserJWTSecret, when set, makes orders take their user from an HS256
	// bearer token's "sub" and shows an order only to its owner.
	UserJWTSecret []byte
	// UserKeys, when set, does the same with tokens an identity provider
	// signed (RS256, ES256, EdDSA) with a key of its JWKS. Set at most one
	// of UserJWTSecret and UserKeys.
	UserKeys *UserKeys
	// UserJWTIssuer and UserJWTAudience, when set, are the "iss" a user
	// token must have and an "aud" it must name.
	UserJWTIssuer, UserJWTAudience string
	// Now is the clock of user tokens' exp and nbf. Default time.Now.
	Now func() time.Time
	// SeparateAdmin puts the admin routes, /metrics and pprof on Admin()
	// instead of the public handler.
	SeparateAdmin bool
	// Pprof serves net/http/pprof under /debug/pprof/ next to the admin
	// routes, behind the admin token. Default false.
	Pprof bool
	// Rooms runs the waiting rooms (issue 21). Default nil: no item has a
	// room, and setting one up is refused.
	Rooms Rooms
	// RoomPoW checks a join's proof-of-work, and RoomChallenge issues the
	// challenges (GET /api/v1/items/{id}/queue/challenge). Default nil:
	// off; set both or neither.
	RoomPoW       PoWCheck
	RoomChallenge PoWIssue
	// RoomRedisBudget bounds the Redis steps of one room request together
	// (join, challenge, status, draw; each event of a ticket's stream): the
	// item view's read, the rate limit and the room's own call share it, so
	// a stalled Redis answers 503 within it, not within one timeout a
	// step. The app sets SECKILL_REDIS_TIMEOUT. Default 0: no shared bound
	// (each step has its own).
	RoomRedisBudget time.Duration
	// HumanCheck checks a join's human token (SECKILL_ROOM_HUMAN_VERIFY_URL,
	// see NewHumanCheck). Default nil: off.
	HumanCheck HumanCheck
	// Events serves the admin feed of order events
	// (GET /api/v1/admin/events). Default nil: no feed (404 not_found).
	Events EventFeed
	// EventsTimeout bounds one read of the feed, so a stalled database
	// answers 503 within it (the app sets SECKILL_DB_TIMEOUT). Default 0:
	// the request's timeout.
	EventsTimeout time.Duration
	// StripeWebhookSecrets are the signing secrets of Stripe's webhook
	// (SECKILL_STRIPE_WEBHOOK_SECRET, several during a rotation): set, POST
	// /api/v1/payments/stripe records payments through Payments and a
	// buyer's /pay is refused (payment_by_provider). Default none: the
	// webhook answers 404 and /pay is the buyer's (the embedded demo).
	StripeWebhookSecrets []string
	// StripeTolerance is how old a webhook's signed timestamp may be.
	// Default stripe-go's webhook.DefaultTolerance (300 s).
	StripeTolerance time.Duration
	// Payments records the webhook's payments. Required with
	// StripeWebhookSecrets.
	Payments Payments
	// Currency is the currency prices are in (SECKILL_CURRENCY). Default
	// DefaultCurrency.
	Currency string
	// PaymentTimeout bounds the database work of one webhook event, so a
	// stalled database answers 503 (and the provider retries) in about
	// this long. The app sets SECKILL_DB_TIMEOUT. Default 0: the request's
	// timeout.
	PaymentTimeout time.Duration
	// PaymentNow is the clock a payment's arrival is judged by against its
	// order's payment deadline (the shop's). Default time.Now.
	PaymentNow func() time.Time
}

// MaxBodyBytes caps request bodies; a larger one gets 413.
const MaxBodyBytes = 64 << 10

// Handler serves the API.
type Handler struct {
	shop      Shop
	log       *slog.Logger
	adminHash [32]byte
	cfg       Config
	engine    *gin.Engine
	admin     *gin.Engine // nil unless SeparateAdmin
	ids       *requestIDs
	jwt       *jwt.Parser
	views     itemViewCache
	tally     *orderTally // refusals of the items a live view watches
}

// New builds the router.
func New(shop Shop, cfg Config) *Handler {
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{shop: shop, log: cfg.Logger, cfg: cfg, adminHash: sha256.Sum256([]byte(cfg.AdminToken)),
		ids: newRequestIDs(), tally: newOrderTally(), jwt: newTokenParser(cfg)}
	h.engine = h.newEngine()
	admin := h.engine
	if cfg.SeparateAdmin {
		h.admin = h.newEngine()
		admin = h.admin
	}
	h.routes(h.engine, admin)
	return h
}

// ServeHTTP makes Handler an http.Handler: the public API (and the admin
// routes unless they are separate).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.engine.ServeHTTP(w, r) }

// Admin is the admin listener's handler, or nil when the admin routes are
// on the public one.
func (h *Handler) Admin() http.Handler {
	if h.admin == nil {
		return nil
	}
	return h.admin
}

// Routes lists the routes of the public and the admin engine (for tests
// comparing them with the API document).
func (h *Handler) Routes() gin.RoutesInfo {
	r := h.engine.Routes()
	if h.admin != nil {
		r = append(r, h.admin.Routes()...)
	}
	return r
}

func (h *Handler) newEngine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	// Every route has one spelling: "/x/" and "/X" are no routes and get a
	// JSON 404, never a redirect (which has no JSON body, and which a client
	// may follow with a POST body).
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	// Client addresses are the peer's: no proxy is trusted to set
	// X-Forwarded-For, so the per-IP limit cannot be dodged by a header.
	_ = e.SetTrustedProxies(nil)
	e.Use(h.frame, h.recover)
	e.NoRoute(func(c *gin.Context) { abort(c, http.StatusNotFound, CodeNotFound, "no such route") })
	e.NoMethod(func(c *gin.Context) {
		abort(c, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
	})
	return e
}

// routes is the route table. admin is pub unless the admin routes have a
// listener of their own. A GET route is registered with get, which answers
// HEAD too.
func (h *Handler) routes(pub, admin *gin.Engine) {
	get(pub, "/healthz", h.healthz)
	get(pub, "/readyz", h.readyz)
	get(pub, "/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", api.OpenAPI) })

	api := pub.Group("/api/v1")
	get(api, "/items/:id", h.publicItem)
	api.POST("/items/:id/orders", h.tallyOrders, h.placeOrder)
	api.POST("/items/:id/queue", h.roomBudget, h.joinQueue)
	get(api, "/items/:id/queue/challenge", h.roomBudget, h.queueChallenge)
	get(api, "/items/:id/queue/:ticket", h.roomBudget, h.queueStatus)
	get(api, roomEventsPath[len("/api/v1"):], h.queueEvents) // a budget an event
	get(api, "/items/:id/draw", h.roomBudget, h.roomDraw)
	get(api, "/orders/:id", h.getOrder)
	api.POST("/orders/:id/pay", h.payOrder)
	api.POST("/orders/:id/cancel", h.cancelOrder)
	api.POST("/payments/stripe", h.stripeWebhook)

	if admin != pub {
		get(admin, "/healthz", h.healthz)
	}
	adm := admin.Group("/api/v1/admin", h.requireAdmin)
	adm.POST("/items", h.createItem)
	get(adm, "/items", h.listItems)
	get(adm, "/items/:id/live", h.liveItem)
	get(adm, "/items/:id", h.adminItem)
	adm.PUT("/items/:id/stock", h.setStock)
	adm.PUT("/items/:id/waiting-room", h.setWaitingRoom)
	adm.DELETE("/items/:id/waiting-room", h.deleteWaitingRoom)
	get(adm, "/items/:id/dead-letters", h.deadLetters)
	adm.POST("/items/:id/dead-letters/requeue", h.requeueDeadLetters)
	adm.POST("/items/:id/reconcile", h.reconcile)
	get(adm, "/events", h.events)
	get(adm, "/orders/:id", h.adminOrder)

	h.consoleRoutes(pub, admin)

	if h.cfg.Metrics != nil {
		get(admin, "/metrics", gin.WrapH(h.cfg.Metrics.Handler()))
	}
	if h.cfg.Pprof {
		dbg := admin.Group("/debug/pprof", h.requireAdmin)
		get(dbg, "/", gin.WrapF(pprof.Index))
		get(dbg, "/cmdline", gin.WrapF(pprof.Cmdline))
		get(dbg, "/profile", gin.WrapF(pprof.Profile))
		get(dbg, "/symbol", gin.WrapF(pprof.Symbol))
		get(dbg, "/trace", gin.WrapF(pprof.Trace))
		get(dbg, "/:profile", func(c *gin.Context) { pprof.Handler(c.Param("profile")).ServeHTTP(c.Writer, c.Request) })
	}
}

// get registers path for GET and HEAD: RFC 9110 (section 9.3.2) asks a
// server to answer HEAD wherever it answers GET, with the same status and
// headers and no body. The handlers run as for a GET; net/http sends no
// body after a HEAD (and the Content-Length a GET gets, when the body fits
// its buffer), and frame ends a HEAD stream at its first flush.
func get(r gin.IRoutes, path string, handlers ...gin.HandlerFunc) {
	r.GET(path, handlers...)
	r.HEAD(path, handlers...)
}

// frame wraps every request: it caps the body and the time, gives the
// request an id (kept from the client when sane: one X-Request-Id of a few
// safe characters) in its context and the X-Request-Id header, and records
// the request's metrics. It logs a request only at debug level.
func (h *Handler) frame(c *gin.Context) {
	start := time.Now()
	id := h.ids.id(c.Request.Header.Values(RequestIDHeader))
	c.Header(RequestIDHeader, id)
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	timeout := h.cfg.RequestTimeout
	if c.FullPath() == roomEventsPath {
		// A ticket's stream is bounded by its own minute (roomevents.go),
		// not by the request timeout, which would cut it after seconds.
		timeout = max(timeout, roomEventsMaxStream+liveMargin)
	}
	ctx, cancel := context.WithTimeout(context.WithValue(c.Request.Context(), requestIDKey{}, id), timeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	if c.Request.Method == http.MethodHead {
		c.Writer = &headWriter{ResponseWriter: c.Writer, end: cancel}
	}
	c.Next()
	d := time.Since(start)
	h.cfg.Metrics.Request(c.FullPath(), c.Request.Method, c.Writer.Status(), d)
	if h.log.Enabled(ctx, slog.LevelDebug) {
		h.log.DebugContext(ctx, "request", "method", c.Request.Method, "route", c.FullPath(),
			"status", c.Writer.Status(), "duration", d)
	}
}

// headWriter is a HEAD request's writer. A handler flushes only to stream
// (the live view), and a stream's headers are all a HEAD asks for: the first
// flush sends them and ends the request's context, so the stream stops
// rather than running its course unseen.
type headWriter struct {
	gin.ResponseWriter
	end context.CancelFunc
}

func (w *headWriter) Flush() {
	w.ResponseWriter.Flush()
	w.end()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *headWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (h *Handler) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			h.log.ErrorContext(c.Request.Context(), "panic", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", r)
			abort(c, http.StatusInternalServerError, CodeInternal, "internal error")
		}
	}()
	c.Next()
}

// requireAdmin checks the bearer token in constant time. Both sides are
// hashed first so the comparison does not leak the token's length either.
func (h *Handler) requireAdmin(c *gin.Context) {
	header, err := singleHeader(c, "Authorization")
	if err != nil {
		h.writeError(c, err)
		return
	}
	token, ok := bearerToken(header)
	got := sha256.Sum256([]byte(token))
	if !ok || token == "" || subtle.ConstantTimeCompare(got[:], h.adminHash[:]) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="seckill-admin"`)
		abort(c, http.StatusUnauthorized, CodeUnauthorized, "a valid admin bearer token is required")
		return
	}
	c.Next()
}

func (h *Handler) healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

func (h *Handler) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), h.cfg.ReadyTimeout)
	defer cancel()
	if err := h.shop.Ready(ctx); err != nil {
		h.log.WarnContext(ctx, "not ready", "err", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable"})
		return
	}
	// The lua-async backlog is shown, not judged: every instance shares
	// it, so taking one out of rotation would not shorten it.
	body := gin.H{"status": "ok"}
	if q, err := h.shop.Backlog(ctx); err == nil {
		body["queue"] = queueView(q)
	} else {
		h.log.WarnContext(ctx, "readyz: lua-async backlog not read", "err", err)
	}
	c.JSON(http.StatusOK, body)
}
