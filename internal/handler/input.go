package handler

import (
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/stock"
)

// What a request says outside its JSON body: path ids, query parameters and
// headers. Each is read in one spelling; a value the API reads once and the
// request gives twice is refused rather than read as the first or the last,
// which a proxy, a cache or a client library may pick differently.

// positiveDecimal parses a positive integer in its one canonical spelling:
// decimal digits, no sign, no leading zero, at most 2^63-1. "+1" and "01"
// are refused rather than read as 1, so an item has one URL (and one key in
// caches, logs and rate limits) and a query one meaning.
func positiveDecimal(raw string) (int64, bool) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 || raw[0] < '1' || raw[0] > '9' {
		return 0, false
	}
	return n, true
}

// pathID parses the :id path parameter, a positive integer (see
// positiveDecimal).
func pathID(c *gin.Context) (int64, error) {
	raw := c.Param("id")
	id, ok := positiveDecimal(raw)
	if !ok {
		return 0, stock.Invalidf("item id must be a positive integer in decimal digits with no sign or leading zero, got %q", raw)
	}
	return id, nil
}

// singleHeader is the value of a header the API reads one value of
// (Authorization, Idempotency-Key): "" when the request has none, and an
// ErrInvalid when it has the header more than once.
func singleHeader(c *gin.Context, name string) (string, error) {
	vs := c.Request.Header.Values(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", stock.Invalidf("the %s header must appear at most once", name)
}

// queryValue is query parameter name's value and whether the request has
// it. Every query parameter the API reads is read here: one given twice is
// an ErrInvalid, and so is a query net/url cannot read whole (a ";" or a
// bad %-escape), from which it would drop pairs silently: "dry_run=true;x"
// must not read as no dry_run, a repair. Parameters a route does not read
// are ignored.
func queryValue(c *gin.Context, name string) (string, bool, error) {
	if _, err := url.ParseQuery(c.Request.URL.RawQuery); err != nil {
		return "", false, stock.Invalidf("the query string is malformed (%v): pairs are name=value joined by &", err)
	}
	vs, ok := c.GetQueryArray(name)
	switch {
	case !ok:
		return "", false, nil
	case len(vs) > 1:
		return "", false, stock.Invalidf("query parameter %s must appear at most once", name)
	}
	return vs[0], true, nil
}

// queryNumber reads an optional query parameter that is an integer from 1
// to max, spelt as ids are (see positiveDecimal); def when it is absent.
func queryNumber(c *gin.Context, name string, max, def int64) (int64, error) {
	raw, ok, err := queryValue(c, name)
	if err != nil || !ok {
		return def, err
	}
	n, valid := positiveDecimal(raw)
	if !valid || n > max {
		return 0, stock.Invalidf("%s must be an integer from 1 to %d in decimal digits with no sign or leading zero, got %q", name, max, raw)
	}
	return n, nil
}

// queryBool reads an optional query parameter that is "true" or "false";
// false when it is absent.
func queryBool(c *gin.Context, name string) (bool, error) {
	raw, ok, err := queryValue(c, name)
	switch {
	case err != nil || !ok:
		return false, err
	case raw == "true":
		return true, nil
	case raw == "false":
		return false, nil
	}
	return false, stock.Invalidf("%s must be true or false, got %q", name, raw)
}
