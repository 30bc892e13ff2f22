package handler

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// Error codes of the API. The JSON shape is always
// {"error": {"code": "...", "message": "..."}}.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthorized        = "unauthorized"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodePayloadTooLarge     = "payload_too_large"
	CodeSoldOut             = "sold_out"
	CodeAlreadyPurchased    = "already_purchased"
	CodeSaleNotStarted      = "sale_not_started"
	CodeSaleEnded           = "sale_ended"
	CodeStockBelowSold      = "stock_below_sold"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeUnavailable         = "unavailable"
	CodeInternal            = "internal"
)

// errorKinds maps domain errors to status, code and a message, in the order
// they are tested. An empty message means the error's own text is shown.
var errorKinds = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	{stock.ErrInvalid, http.StatusBadRequest, CodeInvalidRequest, ""},
	{stock.ErrNotFound, http.StatusNotFound, CodeNotFound, "not found"},
	{stock.ErrSoldOut, http.StatusConflict, CodeSoldOut, "the item is sold out"},
	{stock.ErrAlreadyPurchased, http.StatusConflict, CodeAlreadyPurchased, "this user has already bought this item"},
	{stock.ErrSaleNotStarted, http.StatusConflict, CodeSaleNotStarted, "the sale has not started"},
	{stock.ErrSaleEnded, http.StatusConflict, CodeSaleEnded, "the sale has ended"},
	{stock.ErrStockBelowSold, http.StatusConflict, CodeStockBelowSold, ""},
	{stock.ErrIdempotencyConflict, http.StatusUnprocessableEntity, CodeIdempotencyConflict, "this Idempotency-Key was used with a different request"},
	{stock.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable, "the service is temporarily unavailable; retry shortly"},
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers with the status and code that err means. Unknown errors
// are logged and answered with a generic 500.
func (h *Handler) writeError(c *gin.Context, err error) {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			msg := k.msg
			if msg == "" {
				msg = err.Error()
			}
			if k.status == http.StatusServiceUnavailable {
				c.Header("Retry-After", "1")
				h.log.Warn("unavailable", "method", c.Request.Method, "path", c.FullPath(), "err", err)
			}
			abort(c, k.status, k.code, msg)
			return
		}
	}
	h.log.Error("internal error", "method", c.Request.Method, "path", c.FullPath(), "err", err)
	abort(c, http.StatusInternalServerError, CodeInternal, "internal error")
}

func abort(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}
