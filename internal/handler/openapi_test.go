package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/metrics"
)

var ginParam = regexp.MustCompile(`:(\w+)`)

// TestOpenAPIDocumentsEveryRoute: the embedded document is valid OpenAPI 3,
// every gin route (with every option on) is in it, and everything in it is a
// route. A HEAD route is documented by its GET and the document's one
// sentence on HEAD.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	h := handler.New(nil, handler.Config{AdminToken: "x", Metrics: metrics.New(nil), Pprof: true, SeparateAdmin: true})
	routes := map[string]bool{}
	for _, r := range h.Routes() {
		path := ginParam.ReplaceAllString(r.Path, "{$1}")
		routes[r.Method+" "+path] = true
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s %s is not in api/openapi.yaml", r.Method, path)
		}
	}
	if !strings.Contains(doc.Info.Description, "HEAD is answered wherever GET is") {
		t.Error("api/openapi.yaml's description does not say that HEAD is answered wherever GET is")
	}
	var extra []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !routes[method+" "+path] {
				extra = append(extra, method+" "+path)
			}
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("api/openapi.yaml documents operations that are no routes: %s", strings.Join(extra, ", "))
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	h := handler.New(nil, handler.Config{AdminToken: "x"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != string(api.OpenAPI) {
		t.Errorf("GET /openapi.yaml: got %d and %d bytes, want 200 and the %d-byte document", rec.Code, rec.Body.Len(), len(api.OpenAPI))
	}
}
