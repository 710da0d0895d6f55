package chaos

import (
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
)

// storageFaults is the storage outage switch shared by every agent's
// storage link: while set, requests are refused with 503 ServiceUnavailable
// ("503") or their connection is closed without an answer ("reset").
// Overlapping outages end with the last one; the latest mode applies.
type storageFaults struct {
	mu    sync.Mutex
	depth int
	mode  string
}

func (s *storageFaults) set(mode string) {
	s.mu.Lock()
	if mode == "" {
		s.depth--
		if s.depth <= 0 {
			s.depth, s.mode = 0, ""
		}
	} else {
		s.depth++
		s.mode = mode
	}
	s.mu.Unlock()
}

func (s *storageFaults) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// sentHeader carries, from the agent's uploader to its storage link, when
// the uploader issued the request and whether the job's context was still
// live then. The link reads and removes it.
const sentHeader = "Chaos-Sent"

// stampTransport stamps every request of an agent's uploader with
// sentHeader. It runs in the uploader's own goroutine, so the stamp is the
// agent's send time, not the (possibly later) time the link got to it.
type stampTransport struct{ base http.RoundTripper }

func (t stampTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	live := req.Context().Err() == nil
	out := req.Clone(req.Context())
	out.Header.Set(sentHeader, fmt.Sprintf("%d %t", time.Now().UnixNano(), live))
	return t.base.RoundTrip(out)
}

// S3Control is what the harness gives a storage link.
type S3Control interface {
	Gate() <-chan struct{}
	// S3Hook sees every request before it is forwarded.
	S3Hook(l *S3Link, rec *S3Record) Verdict
}

// S3Link is an HTTP proxy between one agent process and the storage. It
// keeps the Host header the agent signed, so it works with servers that
// check signatures (MinIO). It holds requests while the agent is paused,
// refuses them during a storage outage, cuts everything when the process is
// killed (requests in flight are cancelled mid-body), and records every
// request with the time it arrived.
type S3Link struct {
	ctl    S3Control
	outage *storageFaults
	rec    *Recorder
	srv    *http.Server
	ln     net.Listener
	proxy  *httputil.ReverseProxy
	tr     *http.Transport
	bucket string

	kill     context.Context
	killFunc context.CancelFunc

	mu   sync.Mutex
	name string
	done chan struct{}
}

// NewS3Link listens on a loopback port and forwards to the storage at
// endpoint (host:port, plain HTTP) whose bucket is bucket.
func NewS3Link(endpoint, bucket string, ctl S3Control, outage *storageFaults, rec *Recorder) (*S3Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for storage link: %w", err)
	}
	target := &url.URL{Scheme: "http", Host: endpoint}
	l := &S3Link{ctl: ctl, outage: outage, rec: rec, ln: ln, bucket: bucket, done: make(chan struct{})}
	l.kill, l.killFunc = context.WithCancel(context.Background())
	l.tr = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     10 * time.Second,
	}
	l.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the agent signed this Host
			pr.Out.Header.Del(sentHeader)
		},
		Transport:     l.tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	l.srv = &http.Server{Handler: http.HandlerFunc(l.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(l.done)
		_ = l.srv.Serve(ln)
	}()
	return l, nil
}

// Endpoint is what the agent's uploader connects to (host:port).
func (l *S3Link) Endpoint() string { return l.ln.Addr().String() }

func (l *S3Link) setName(name string) {
	l.mu.Lock()
	l.name = name
	l.mu.Unlock()
}

func (l *S3Link) getName() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.name
}

// Kill cuts the link: the listener and every connection are closed and
// requests in flight to the storage are cancelled. It returns at once.
func (l *S3Link) Kill() {
	l.killFunc()
	_ = l.ln.Close()
	go func() { _ = l.srv.Close() }()
}

// Close kills the link and waits until it has stopped.
func (l *S3Link) Close() {
	l.Kill()
	_ = l.srv.Close()
	<-l.done
	l.tr.CloseIdleConnections()
}

func (l *S3Link) dead() bool { return l.kill.Err() != nil }

// classify names an S3 request and the token its key belongs to.
func (l *S3Link) classify(r *http.Request) *S3Record {
	rec := &S3Record{Link: l.getName(), Method: r.Method, Read: time.Now(), Live: true}
	if v := r.Header.Get(sentHeader); v != "" {
		var ns int64
		var live bool
		if _, err := fmt.Sscanf(v, "%d %t", &ns, &live); err == nil {
			rec.Read, rec.Live = time.Unix(0, ns), live
		}
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	if b, key, ok := strings.Cut(path, "/"); ok && b == l.bucket {
		rec.Key = key
	}
	q := r.URL.Query()
	_, uploads := q["uploads"]
	switch {
	case r.Method == http.MethodPut && q.Has("partNumber"):
		rec.Kind = s3Part
	case r.Method == http.MethodPut && rec.Key != "":
		rec.Kind = s3Put
	case r.Method == http.MethodPost && uploads:
		rec.Kind = s3Initiate
	case r.Method == http.MethodPost && q.Has("uploadId"):
		rec.Kind = s3Complete
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		rec.Kind = s3Abort
	case r.Method == http.MethodGet && (rec.Key == "" || uploads || q.Has("uploadId")):
		rec.Kind = s3List
	case r.Method == http.MethodHead:
		rec.Kind = s3Head
	case r.Method == http.MethodGet:
		rec.Kind = s3Get
	default:
		rec.Kind = s3Other
	}
	// jobs/<job_id>/g<generation>/<name>
	if p := strings.Split(rec.Key, "/"); len(p) == 4 && p[0] == "jobs" && strings.HasPrefix(p[2], "g") {
		if g, err := strconv.ParseInt(p[2][1:], 10, 64); err == nil {
			rec.Token = fencing.Token{JobID: p[1], Owner: rec.Link, Generation: g}
		}
	}
	return rec
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (l *S3Link) serve(w http.ResponseWriter, r *http.Request) {
	rec := l.rec.s3(l.classify(r))
	// A paused process sends nothing.
	for {
		g := l.ctl.Gate()
		if g == nil {
			break
		}
		select {
		case <-g:
		case <-r.Context().Done():
			l.rec.s3Done(rec, 0, "lost")
			return
		case <-l.kill.Done():
		}
		if l.dead() {
			break
		}
	}
	if l.dead() {
		l.rec.s3Done(rec, 0, "killed")
		reset(w)
		return
	}
	v := l.ctl.S3Hook(l, rec)
	if v.Drop || l.dead() {
		l.rec.s3Done(rec, 0, "killed")
		reset(w)
		if v.After != nil {
			v.After()
		}
		return
	}
	switch l.outage.get() {
	case "503":
		l.rec.s3Done(rec, http.StatusServiceUnavailable, "storage outage")
		unavailable(w, r)
		return
	case "reset":
		l.rec.s3Done(rec, 0, "storage outage")
		reset(w)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(l.kill, cancel)
	defer stop()
	sw := &statusWriter{ResponseWriter: w}
	l.proxy.ServeHTTP(sw, r.WithContext(ctx))
	note := ""
	if l.dead() {
		note = "killed"
	}
	l.rec.s3Done(rec, sw.code, note)
	if v.After != nil {
		v.After()
	}
}

// reset closes the connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	c, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

type s3ErrorBody struct {
	XMLName  xml.Name `xml:"Error"`
	Code     string   `xml:"Code"`
	Message  string   `xml:"Message"`
	Resource string   `xml:"Resource"`
}

func unavailable(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(s3ErrorBody{Code: "ServiceUnavailable", Message: "storage outage (fault injected)", Resource: r.URL.Path})
}

// tcpProxy forwards TCP connections (to PostgreSQL) and can cut them all and
// refuse new ones for a while: what the clients see of a database restart.
type tcpProxy struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	refuse  int // outages in progress
	stopped bool
}

func newTCPProxy(upstream string) (*tcpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for tcp proxy: %w", err)
	}
	p := &tcpProxy{upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse > 0 || p.stopped {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Go(func() {
			defer p.untrack(c)
			defer c.Close()
			up, err := net.DialTimeout("tcp", p.upstream, time.Second)
			if err != nil {
				return
			}
			if !p.track(up) {
				up.Close()
				return
			}
			defer p.untrack(up)
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { copyConn(up, c); done <- struct{}{} }()
			go func() { copyConn(c, up); done <- struct{}{} }()
			<-done
			c.Close()
			up.Close()
			<-done
		})
	}
}

func copyConn(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every connection and refuses new ones until up is called
// as often as cut.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	p.refuse++
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *tcpProxy) up() {
	p.mu.Lock()
	p.refuse = max(0, p.refuse-1)
	p.mu.Unlock()
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
