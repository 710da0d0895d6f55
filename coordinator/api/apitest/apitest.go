// Package apitest checks HTTP exchanges with the coordinator's API against
// its OpenAPI document (docs/openapi.yaml), so that the document cannot
// drift from what the server does. Every test of the API sends its
// requests through Client or Transport:
//
//   - a request the document accepts must get a response the document
//     describes (status, headers, body);
//   - a request the document rejects (unknown member, wrong type, missing
//     parameter) must be refused by the server with a 4xx problem document
//     the document describes, since the server must be at least as strict;
//   - a request to a path the document does not have must be answered 404
//     or 405 with a problem document.
//
// A stream (text/event-stream) is checked by status and headers when it
// starts, then frame by frame as the caller reads it: each frame's data
// must be an Event of the document (components.schemas.Event) whose id and
// type are the frame's.
//
// A Parquet file (application/vnd.apache.parquet) is checked by status,
// headers and the document's declaring that media type, then as the
// caller reads it, without holding it: it must start and end with the
// Parquet magic "PAR1" (a file cut before its footer does not).
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/edgeagent/edgeagent/docs"
)

var (
	loadOnce sync.Once
	doc      *openapi3.T
	router   routers.Router
	loadErr  error
)

// Doc returns docs/openapi.yaml, loaded and validated once per test binary.
func Doc(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	loadOnce.Do(func() {
		loader := openapi3.NewLoader()
		d, err := loader.LoadFromData(docs.OpenAPI)
		if err != nil {
			loadErr = fmt.Errorf("load docs/openapi.yaml: %w", err)
			return
		}
		if err := d.Validate(loader.Context); err != nil {
			loadErr = fmt.Errorf("docs/openapi.yaml is not a valid OpenAPI document: %w", err)
			return
		}
		r, err := gorillamux.NewRouter(d)
		if err != nil {
			loadErr = fmt.Errorf("route docs/openapi.yaml: %w", err)
			return
		}
		doc, router = d, r
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return doc, router
}

// Transport is an http.RoundTripper that checks every exchange against
// the OpenAPI document and reports a mismatch as an error of the test.
type Transport struct {
	// Base sends the requests; default http.DefaultTransport.
	Base http.RoundTripper
	t    testing.TB
	r    routers.Router
	doc  *openapi3.T

	mu    sync.Mutex
	count int
}

// NewTransport returns a checking transport over base (nil: the default).
func NewTransport(t testing.TB, base http.RoundTripper) *Transport {
	t.Helper()
	d, r := Doc(t)
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{Base: base, t: t, r: r, doc: d}
}

// Client returns an HTTP client whose exchanges are all checked.
func Client(t testing.TB) *http.Client {
	t.Helper()
	return &http.Client{Transport: NewTransport(t, nil)}
}

// Checked returns how many exchanges the transport checked.
func (tr *Transport) Checked() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.count
}

// RoundTrip sends req and checks the exchange.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	send := req.Clone(req.Context())
	send.Body = io.NopCloser(bytes.NewReader(body))
	if body == nil {
		send.Body = http.NoBody
	}
	what := req.Method + " " + req.URL.RequestURI()

	// Match against a copy whose URL is relative: the document's server
	// is "/".
	probe := req.Clone(context.Background())
	probe.URL.Scheme, probe.URL.Host, probe.Host = "", "", ""
	probe.Body = io.NopCloser(bytes.NewReader(body))
	route, params, routeErr := tr.r.FindRoute(probe)
	var (
		in         *openapi3filter.RequestValidationInput
		reqInvalid error
	)
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	if routeErr == nil {
		in = &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: opts}
		reqInvalid = openapi3filter.ValidateRequest(context.Background(), in)
	}

	resp, err := tr.Base.RoundTrip(send)
	if err != nil {
		return nil, err
	}
	tr.mu.Lock()
	tr.count++
	tr.mu.Unlock()

	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if routeErr != nil {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed || mt != "application/problem+json" {
			tr.t.Errorf("openapi: %s is not in docs/openapi.yaml (%v), yet the server answered %d %s", what, routeErr, resp.StatusCode, ct)
		}
		return resp, nil
	}
	if reqInvalid != nil && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		tr.t.Errorf("openapi: docs/openapi.yaml rejects %s (%v), yet the server answered %d", what, reqInvalid, resp.StatusCode)
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if mt == "text/event-stream" {
		rin.Options.ExcludeResponseBody = true
		if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
			tr.t.Errorf("openapi: the response to %s does not match docs/openapi.yaml: %v", what, err)
		}
		if resp.StatusCode == http.StatusOK {
			resp.Body = tr.checkEvents(what, resp.Body)
		}
		return resp, nil
	}
	if mt == "application/x-ndjson" {
		// JSON Lines: checked line by line as the caller reads them,
		// never held whole (an export may be large).
		rin.Options.ExcludeResponseBody = true
		if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
			tr.t.Errorf("openapi: the response to %s does not match docs/openapi.yaml: %v", what, err)
		}
		if resp.StatusCode == http.StatusOK {
			resp.Body = tr.checkLines(what, route.Operation, resp.Body)
		}
		return resp, nil
	}
	if mt == ParquetMediaType {
		rin.Options.ExcludeResponseBody = true
		if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
			tr.t.Errorf("openapi: the response to %s does not match docs/openapi.yaml: %v", what, err)
		}
		if !declares(route.Operation, resp.StatusCode, mt) {
			tr.t.Errorf("openapi: docs/openapi.yaml declares no %s response %d to %s", mt, resp.StatusCode, what)
		}
		if resp.StatusCode == http.StatusOK {
			resp.Body = &parquetChecker{body: resp.Body, report: func(format string, args ...any) {
				tr.t.Errorf("openapi: the Parquet file of %s: "+format, append([]any{what}, args...)...)
			}}
		}
		return resp, nil
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	rin.SetBodyBytes(rb)
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		tr.t.Errorf("openapi: the response %d to %s does not match docs/openapi.yaml: %v\nbody: %s", resp.StatusCode, what, err, clip(rb))
	}
	if resp.StatusCode >= 400 && mt != "application/problem+json" {
		tr.t.Errorf("openapi: %s answered %d with %q, not a problem document", what, resp.StatusCode, ct)
	}
	return resp, nil
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return strings.TrimSpace(s)
}

// checkEvents returns body checking, as it is read, that every frame of
// the stream is an Event of the document.
func (tr *Transport) checkEvents(what string, body io.ReadCloser) io.ReadCloser {
	ref := tr.doc.Components.Schemas["Event"]
	if ref == nil || ref.Value == nil {
		tr.t.Errorf("openapi: docs/openapi.yaml has no Event schema for the stream of %s", what)
		return body
	}
	return &eventChecker{body: body, schema: ref.Value, report: func(format string, args ...any) {
		tr.t.Errorf("openapi: an event of %s does not match docs/openapi.yaml: "+format, append([]any{what}, args...)...)
	}}
}

// checkLines returns body checking, as it is read, that every line is a
// JSON value of the contentSchema of op's 200 application/x-ndjson
// response.
func (tr *Transport) checkLines(what string, op *openapi3.Operation, body io.ReadCloser) io.ReadCloser {
	var schema *openapi3.Schema
	if r := op.Responses.Status(http.StatusOK); r != nil && r.Value != nil {
		if mt := r.Value.Content.Get("application/x-ndjson"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.ContentSchema != nil {
			schema = mt.Schema.Value.ContentSchema.Value
		}
	}
	if schema == nil {
		tr.t.Errorf("openapi: docs/openapi.yaml has no contentSchema for the JSON Lines of %s", what)
		return body
	}
	return &lineChecker{body: body, schema: schema, report: func(format string, args ...any) {
		tr.t.Errorf("openapi: a line of %s does not match docs/openapi.yaml: "+format, append([]any{what}, args...)...)
	}}
}

// ParquetMediaType is the media type of an Apache Parquet file.
const ParquetMediaType = "application/vnd.apache.parquet"

// parquetMagic starts and ends every Parquet file.
const parquetMagic = "PAR1"

// declares reports whether op's response status has content of media
// type mt.
func declares(op *openapi3.Operation, status int, mt string) bool {
	r := op.Responses.Status(status)
	return r != nil && r.Value != nil && r.Value.Content.Get(mt) != nil
}

// parquetChecker passes a Parquet file through and checks, at its end,
// that it started and ended with the Parquet magic: a file whose footer
// is missing (cut short) does not end with it.
type parquetChecker struct {
	body   io.ReadCloser
	report func(format string, args ...any)
	head   []byte // the first bytes, up to 4
	tail   []byte // the last bytes, up to 4
	n      int64
	done   bool
}

func (c *parquetChecker) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	c.n += int64(n)
	if len(c.head) < len(parquetMagic) {
		c.head = append(c.head, p[:min(n, len(parquetMagic)-len(c.head))]...)
	}
	c.tail = append(c.tail, p[:n]...)
	if len(c.tail) > len(parquetMagic) {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-len(parquetMagic):]...)
	}
	if errors.Is(err, io.EOF) && !c.done {
		c.done = true
		if string(c.head) != parquetMagic || string(c.tail) != parquetMagic || c.n < 2*int64(len(parquetMagic)) {
			c.report("%d bytes, starting %q and ending %q: not a whole Parquet file (it starts and ends with %q)", c.n, c.head, c.tail, parquetMagic)
		}
	}
	return n, err
}

func (c *parquetChecker) Close() error { return c.body.Close() }

// lineChecker passes JSON Lines through and checks each complete line.
type lineChecker struct {
	body   io.ReadCloser
	schema *openapi3.Schema
	report func(format string, args ...any)
	line   []byte
}

func (c *lineChecker) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			c.line = append(c.line, b)
			continue
		}
		var v any
		if jerr := json.Unmarshal(c.line, &v); jerr != nil {
			c.report("not JSON (%v): %s", jerr, clip(c.line))
		} else if verr := c.schema.VisitJSON(v, openapi3.MultiErrors()); verr != nil {
			c.report("%v\nline: %s", verr, clip(c.line))
		}
		c.line = c.line[:0]
	}
	if errors.Is(err, io.EOF) && len(c.line) > 0 {
		c.report("the last line has no line feed: %s", clip(c.line))
	}
	return n, err
}

func (c *lineChecker) Close() error { return c.body.Close() }

// eventChecker passes a stream through and checks each complete frame.
type eventChecker struct {
	body   io.ReadCloser
	schema *openapi3.Schema
	report func(format string, args ...any)
	line   []byte   // the line being read
	frame  []string // the lines of the frame being read
}

func (c *eventChecker) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			c.line = append(c.line, b)
			continue
		}
		line := strings.TrimSuffix(string(c.line), "\r")
		c.line = c.line[:0]
		if line != "" {
			c.frame = append(c.frame, line)
			continue
		}
		c.check(c.frame)
		c.frame = c.frame[:0]
	}
	return n, err
}

func (c *eventChecker) Close() error { return c.body.Close() }

// check checks one frame: comments and retry lines pass; a frame with data
// needs an id, and its data is an Event with that id and the event name
// as its type.
func (c *eventChecker) check(lines []string) {
	var id, name, data string
	hasData := false
	for _, l := range lines {
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			// a comment
		case "id":
			id = value
		case "event":
			name = value
		case "data":
			data += value
			hasData = true
		case "retry":
		default:
			c.report("unknown field %q in frame %q", field, strings.Join(lines, "\n"))
		}
	}
	if !hasData {
		return
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		c.report("data is not JSON (%v): %s", err, clip([]byte(data)))
		return
	}
	if err := c.schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		c.report("%v\ndata: %s", err, clip([]byte(data)))
		return
	}
	m, _ := v.(map[string]any)
	if got := fmt.Sprint(m["type"]); name != got {
		c.report("event: %q, but the data's type is %q", name, got)
	}
	if num, ok := m["id"].(float64); !ok || id != strconv.FormatInt(int64(num), 10) {
		c.report("id: %q, but the data's id is %v", id, m["id"])
	}
}
