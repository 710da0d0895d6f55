package uploader

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// errReplyLost is what the faulty transport returns for a request whose
// response it dropped after the server processed the request.
var errReplyLost = errors.New("connection reset by peer (reply dropped by test)")

// Request kinds the faulty transport tells apart.
const (
	kindPut      = "put"      // single PUT of an object
	kindPart     = "part"     // PUT of a multipart part
	kindInitiate = "initiate" // POST ?uploads
	kindComplete = "complete" // POST ?uploadId=
	kindAbort    = "abort"    // DELETE ?uploadId=
	kindList     = "list"     // GET ?uploads (incomplete uploads) or ?uploadId= (parts)
	kindOther    = "other"
)

func kindOf(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return kindPart
	case r.Method == http.MethodPut:
		return kindPut
	case r.Method == http.MethodPost && q.Has("uploads"):
		return kindInitiate
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return kindComplete
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return kindAbort
	case r.Method == http.MethodGet && (q.Has("uploads") || q.Has("uploadId")):
		return kindList
	}
	return kindOther
}

// fault is what the transport does to the next requests of one kind.
type fault struct {
	kind string
	// dropReply lets the request reach the server, then drops the response
	// and fails the request as a reset connection would.
	dropReply bool
	// status answers without reaching the server.
	status int
	times  int
}

// exchange is one request the transport carried and how it ended.
type exchange struct {
	kind   string
	part   int
	status int // 0 when no response reached the client
	inm    string
}

// faulty is an HTTP transport that injects faults and records every
// exchange. onResponse, when set, sees each response that reaches the
// client.
type faulty struct {
	next       http.RoundTripper
	mu         sync.Mutex
	faults     []*fault
	log        []exchange
	onResponse func(exchange)
}

func (f *faulty) inject(ft fault) {
	f.mu.Lock()
	f.faults = append(f.faults, &ft)
	f.mu.Unlock()
}

func (f *faulty) take(kind string) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.faults {
		if ft.kind == kind && ft.times > 0 {
			ft.times--
			return ft
		}
	}
	return nil
}

func (f *faulty) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchange{kind: kindOf(req), inm: req.Header.Get("If-None-Match")}
	ex.part, _ = strconv.Atoi(req.URL.Query().Get("partNumber"))
	ft := f.take(ex.kind)
	if ft != nil && ft.status != 0 {
		if req.Body != nil {
			_, _ = io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		ex.status = ft.status
		f.record(ex)
		code := map[int]string{403: "AccessDenied", 500: "InternalError", 503: "ServiceUnavailable"}[ft.status]
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>injected by test</Message></Error>`
		return &http.Response{
			StatusCode: ft.status, Status: strconv.Itoa(ft.status) + " " + http.StatusText(ft.status),
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/xml"}},
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       req,
		}, nil
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		f.record(ex)
		return nil, err
	}
	if ft != nil && ft.dropReply {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.record(ex) // status 0: the client never saw it
		return nil, errReplyLost
	}
	ex.status = resp.StatusCode
	f.record(ex)
	if f.onResponse != nil {
		f.onResponse(ex)
	}
	return resp, nil
}

func (f *faulty) record(ex exchange) {
	f.mu.Lock()
	f.log = append(f.log, ex)
	f.mu.Unlock()
}

func (f *faulty) exchanges() []exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]exchange(nil), f.log...)
}

// count returns how many exchanges of kind ended with status.
func (f *faulty) count(kind string, status int) int {
	n := 0
	for _, ex := range f.exchanges() {
		if ex.kind == kind && ex.status == status {
			n++
		}
	}
	return n
}
