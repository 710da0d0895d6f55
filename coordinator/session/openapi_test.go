package session_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The OpenAPI description of the sessions routes, loaded once.
var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func openAPIRouter(t *testing.T) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join("..", "..", "docs", "openapi-sessions.yaml"))
		if err != nil {
			specErr = err
			return
		}
		if specErr = doc.Validate(context.Background()); specErr != nil {
			return
		}
		doc.Servers = nil // match any host
		specRouter, specErr = legacy.NewRouter(doc)
	})
	if specErr != nil {
		t.Errorf("docs/openapi-sessions.yaml: %v", specErr)
	}
	return specRouter
}

// validating serves h and checks every exchange with checkOpenAPI, those
// of clients outside the test (examples/python/ai_loop.py) included.
func validating(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		checkOpenAPI(t, r, body, rec.Code, rec.Header(), rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// checkOpenAPI validates one exchange against docs/openapi-sessions.yaml:
// the route and the response must be described there; a request the
// document calls invalid must have been refused (4xx), and one the server
// accepted (2xx) must be valid.
func checkOpenAPI(t *testing.T, req *http.Request, body []byte, status int, header http.Header, respBody []byte) {
	t.Helper()
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	router := openAPIRouter(t)
	if router == nil {
		return
	}
	route, params, err := router.FindRoute(r)
	if err != nil {
		if status == http.StatusMethodNotAllowed || status == http.StatusNotFound {
			return // a route the document rightly does not have
		}
		t.Errorf("openapi: %s %s: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case reqErr != nil && status < 400:
		t.Errorf("openapi: %s %s answered %d, but the document refuses the request: %v", req.Method, req.URL.Path, status, reqErr)
	case reqErr != nil && status >= 500:
		t.Errorf("openapi: %s %s: an invalid request answered %d: %v", req.Method, req.URL.Path, status, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("openapi: %s %s: response %d %s does not match the document: %v", req.Method, req.URL.Path, status, respBody, err)
	}
}
