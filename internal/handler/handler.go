// Package handler is the HTTP API: it parses and validates requests, calls
// the domain, and maps domain errors to statuses in one table.
package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// Shop is the domain the handler drives; *stock.Service implements it.
type Shop interface {
	CreateItem(ctx context.Context, in stock.NewItem) (*stock.Item, error)
	Item(ctx context.Context, id int64) (*stock.Item, error)
	SetStock(ctx context.Context, id, n int64) (*stock.Item, error)
	PlaceOrder(ctx context.Context, req stock.OrderRequest) (*stock.Order, bool, error)
	Order(ctx context.Context, id string) (*stock.Order, error)
	Ready(ctx context.Context) error
}

var _ Shop = (*stock.Service)(nil)

// Config tunes the handler.
type Config struct {
	// AdminToken is the bearer token of the admin routes. Required.
	AdminToken string
	// RequestTimeout bounds each request's work. Default 10s.
	RequestTimeout time.Duration
	// ReadyTimeout bounds /readyz's checks. Default 1s.
	ReadyTimeout time.Duration
	// Logger receives errors. Default slog.Default().
	Logger *slog.Logger
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
	h := &Handler{shop: shop, log: cfg.Logger, cfg: cfg, adminHash: sha256.Sum256([]byte(cfg.AdminToken))}
	h.engine = h.routes()
	return h
}

// ServeHTTP makes Handler an http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.engine.ServeHTTP(w, r) }

func (h *Handler) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(h.recover, h.limits)
	e.NoRoute(func(c *gin.Context) { abort(c, http.StatusNotFound, CodeNotFound, "no such route") })
	e.NoMethod(func(c *gin.Context) {
		abort(c, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
	})

	e.GET("/healthz", h.healthz)
	e.GET("/readyz", h.readyz)

	api := e.Group("/api/v1")
	api.GET("/items/:id", h.publicItem)
	api.POST("/items/:id/orders", h.placeOrder)
	api.GET("/orders/:id", h.getOrder)

	admin := api.Group("/admin", h.requireAdmin)
	admin.POST("/items", h.createItem)
	admin.GET("/items/:id", h.adminItem)
	admin.PUT("/items/:id/stock", h.setStock)
	return e
}

// limits caps the body and the time of every request.
func (h *Handler) limits(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	ctx, cancel := context.WithTimeout(c.Request.Context(), h.cfg.RequestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

func (h *Handler) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			h.log.Error("panic", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", r)
			abort(c, http.StatusInternalServerError, CodeInternal, "internal error")
		}
	}()
	c.Next()
}

// requireAdmin checks the bearer token in constant time. Both sides are
// hashed first so the comparison does not leak the token's length either.
func (h *Handler) requireAdmin(c *gin.Context) {
	auth := c.GetHeader("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
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
		h.log.Warn("not ready", "err", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}
