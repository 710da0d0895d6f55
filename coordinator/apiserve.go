package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// APIFactory builds the HTTP API handler of a daemon (package
// coordinator/api; docs/api.md). NewDaemon calls it once the daemon is
// connected, when api.listen is set.
type APIFactory func(d *Daemon) (http.Handler, error)

// APIAddr returns the address the HTTP API listens on while Run serves it,
// nil otherwise.
func (d *Daemon) APIAddr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.apiAddr
}

// apiGrace is how long requests in flight (and streams) get to end when
// the API shuts down; streams are told to end after half of it.
const apiGrace = 5 * time.Second

// listenAPI opens the API's listener: TLS when api.tls_cert is set.
func (d *Daemon) listenAPI() (net.Listener, error) {
	a := d.cfg.API
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen for the api: %w", err)
	}
	if !a.TLS() {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(a.TLSCert, a.TLSKey)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("load api tls certificate: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// serveAPI serves the API on ln until ctx is cancelled, then shuts it
// down: no new requests, those in flight get apiGrace to finish, and the
// contexts of long-lived requests (event streams, long polls) are
// cancelled after half of it so that they end on their own.
func (d *Daemon) serveAPI(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	idle := d.cfg.API.IdleTimeout.Duration()
	if idle <= 0 {
		idle = 2 * time.Minute
	}
	srv := &http.Server{
		Handler:           bodyReadTimeout(d.api, d.cfg.API.ReadTimeout.Duration()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	srv.RegisterOnShutdown(func() { time.AfterFunc(apiGrace/2, cancelBase) })
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), apiGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("serve api: %w", err)
	}
	return nil
}

// bodyReadTimeout bounds how long a client may take to send a request's
// body (api.read_timeout): the connection's read deadline is set when the
// request starts and cleared once the body is read, so that a body sent
// slowly is cut off while event streams and long polls, which send none,
// are not bound (docs/security.md, "Limits of the HTTP API"). It wraps the whole handler
// of the API's listener.
func bodyReadTimeout(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the read deadline once the body is read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
