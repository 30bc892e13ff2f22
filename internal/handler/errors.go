package handler

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
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
	CodeOrderPaid           = "order_paid"
	CodeOrderCancelled      = "order_cancelled"
	CodeOrderExpired        = "order_expired"
	CodeOrderPending        = "order_pending"
	CodeOrderFailed         = "order_failed"
	CodeRateLimited         = "rate_limited"
	CodeUnavailable         = "unavailable"
	CodeInternal            = "internal"
	// The waiting room's (docs/API.md, "Waiting room").
	CodeNoWaitingRoom    = "no_waiting_room"
	CodeRoomOpened       = "room_opened"
	CodeRoomFull         = "room_full"
	CodePassRequired     = "pass_required"
	CodePassInvalid      = "pass_invalid"
	CodePassExpired      = "pass_expired"
	CodePassWrongUser    = "pass_wrong_user"
	CodePassWrongItem    = "pass_wrong_item"
	CodePoWRequired      = "pow_required"
	CodePoWInvalid       = "pow_invalid"
	CodeHumanCheckFailed = "human_check_failed"
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
	// The room's own check of its arguments: the handler validates first,
	// so this is a backstop, but bad input is a 400 wherever it is caught.
	{room.ErrInvalid, http.StatusBadRequest, CodeInvalidRequest, ""},
	{stock.ErrNotFound, http.StatusNotFound, CodeNotFound, "not found"},
	{stock.ErrSoldOut, http.StatusConflict, CodeSoldOut, "the item is sold out"},
	{stock.ErrAlreadyPurchased, http.StatusConflict, CodeAlreadyPurchased, "this user has already bought this item"},
	{stock.ErrSaleNotStarted, http.StatusConflict, CodeSaleNotStarted, "the sale has not started"},
	{stock.ErrSaleEnded, http.StatusConflict, CodeSaleEnded, "the sale has ended"},
	{stock.ErrStockBelowSold, http.StatusConflict, CodeStockBelowSold, ""},
	{stock.ErrIdempotencyConflict, http.StatusUnprocessableEntity, CodeIdempotencyConflict, "this Idempotency-Key was used with a different request"},
	{stock.ErrOrderPaid, http.StatusConflict, CodeOrderPaid, "the order is paid; it can no longer be cancelled"},
	{stock.ErrOrderCancelled, http.StatusConflict, CodeOrderCancelled, "the order is cancelled; it can no longer be paid"},
	{stock.ErrOrderExpired, http.StatusConflict, CodeOrderExpired, "the order's payment deadline has passed; it is cancelled and its unit returned to stock"},
	{stock.ErrOrderPending, http.StatusConflict, CodeOrderPending, "the order is not yet persisted; retry shortly"},
	{stock.ErrOrderFailed, http.StatusConflict, CodeOrderFailed, "the order failed: the database refused it after it was queued (see its reason); it can be neither paid nor cancelled"},
	{errUnauthorized, http.StatusUnauthorized, CodeUnauthorized, ""},
	{errRateLimited, http.StatusTooManyRequests, CodeRateLimited, "too many requests; retry after the time in Retry-After"},
	{rooms.ErrNoWaitingRoom, http.StatusConflict, CodeNoWaitingRoom, "the item has no waiting room"},
	{rooms.ErrRoomOpened, http.StatusConflict, CodeRoomOpened, "the waiting room has opened or has tickets: lottery can no longer change"},
	{rooms.ErrRoomFull, http.StatusConflict, CodeRoomFull, "the waiting room holds as many tickets as it may: no new place is given (a user who has a ticket keeps it)"},
	{room.ErrPassMissing, http.StatusForbidden, CodePassRequired, "this item's sale has a waiting room: the order needs the Seckill-Pass header from an admitted ticket"},
	{stock.ErrPassRequired, http.StatusForbidden, CodePassRequired, "this item's sale has a waiting room: the order needs the Seckill-Pass header from an admitted ticket"},
	{room.ErrPassExpired, http.StatusForbidden, CodePassExpired, "the pass has expired"},
	{room.ErrPassWrongUser, http.StatusForbidden, CodePassWrongUser, "the pass was issued to another user"},
	{room.ErrPassWrongItem, http.StatusForbidden, CodePassWrongItem, "the pass was issued for another item"},
	{room.ErrPassWrongLine, http.StatusForbidden, CodePassInvalid, "the pass is of a line this item's waiting room has started over from: join again"},
	{room.ErrPassRejected, http.StatusForbidden, CodePassInvalid, "the pass is forged or malformed"},
	{errPoWRequired, http.StatusForbidden, CodePoWRequired, "this waiting room needs a proof-of-work: get a challenge and solve it"},
	{errPoWInvalid, http.StatusForbidden, CodePoWInvalid, "the proof-of-work does not verify"},
	{errPaymentByProvider, http.StatusForbidden, CodePaymentByProvider, "payments are recorded by the payment provider's webhook: an order is paid by paying it with the provider"},
	{errHumanCheckFailed, http.StatusForbidden, CodeHumanCheckFailed, "this waiting room needs a human check: the join's human token is missing or the verifier refused it"},
	{stock.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable, "the service is temporarily unavailable; retry shortly"},
}

// The answers with a fixed message are encoded once: a refused stampede
// (sold out, already purchased) is answered without encoding each time.
// errorBodies[i] is errorKinds[i]'s answer when its message is fixed.
var errorBodies = func() [][]byte {
	bodies := make([][]byte, len(errorKinds))
	for i, k := range errorKinds {
		if k.msg == "" {
			continue
		}
		b, err := json.Marshal(errorBody{Error: errorDetail{Code: k.code, Message: k.msg}})
		if err != nil {
			panic(err)
		}
		bodies[i] = b
	}
	return bodies
}()

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errRateLimited is a request refused by a rate limit; the refusal is a
// *rateLimited, which carries when to retry.
var errRateLimited = errors.New("rate limited")

type rateLimited struct{ retryAfter time.Duration }

func (e *rateLimited) Error() string        { return "rate limited" }
func (e *rateLimited) Is(target error) bool { return target == errRateLimited }

// ErrorCode is the API code err is answered with ("internal" when unknown).
func ErrorCode(err error) string {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return CodeInternal
}

// writeError answers with the status and code that err means. Unknown errors
// are logged and answered with a generic 500.
func (h *Handler) writeError(c *gin.Context, err error) {
	for i, k := range errorKinds {
		if errors.Is(err, k.err) {
			msg := k.msg
			if msg == "" {
				msg = err.Error()
			}
			switch k.status {
			case http.StatusServiceUnavailable:
				c.Header("Retry-After", "1")
				h.log.WarnContext(c.Request.Context(), "unavailable", "method", c.Request.Method, "path", c.FullPath(), "err", err)
			case http.StatusTooManyRequests:
				var rl *rateLimited
				secs := int64(1)
				if errors.As(err, &rl) {
					secs = max(1, int64(math.Ceil(rl.retryAfter.Seconds())))
				}
				c.Header("Retry-After", strconv.FormatInt(secs, 10))
			case http.StatusUnauthorized:
				c.Header("WWW-Authenticate", `Bearer realm="seckill"`)
			}
			if body := errorBodies[i]; body != nil {
				c.Abort()
				c.Data(k.status, jsonContentType, body)
				return
			}
			abort(c, k.status, k.code, msg)
			return
		}
	}
	h.log.ErrorContext(c.Request.Context(), "internal error", "method", c.Request.Method, "path", c.FullPath(), "err", err)
	abort(c, http.StatusInternalServerError, CodeInternal, "internal error")
}

// jsonContentType is gin's for JSON answers.
const jsonContentType = "application/json; charset=utf-8"

func abort(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}
