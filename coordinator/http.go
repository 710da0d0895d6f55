package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry returns the Prometheus registry of the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Ready checks what the coordinator needs to serve: Run serves every agent
// verb, the store answers, the NATS connection is up, and the storage bucket
// is reachable when presigned uploads are configured. It returns one error per failed check, by name.
func (s *Server) Ready(ctx context.Context) map[string]error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out := map[string]error{}
	if !s.serving.Load() {
		out["service"] = errors.New("not serving the agent verbs")
	}
	if err := s.store.Ping(ctx); err != nil {
		out["store"] = err
	}
	if st := s.nc.Status(); st != nats.CONNECTED {
		out["nats"] = fmt.Errorf("nats connection %s", st)
	}
	if s.opts.Presigner != nil {
		if err := s.opts.Presigner.Check(ctx); err != nil {
			out["storage"] = err
		}
	}
	return out
}

// Handler serves /metrics (Prometheus), /healthz (the process is up) and
// /readyz (Ready: 200 when every check passes, 503 listing the failures).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{Registry: s.metrics.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		failed := s.Ready(r.Context())
		if len(failed) == 0 {
			fmt.Fprintln(w, "ready")
			return
		}
		names := make([]string, 0, len(failed))
		for n := range failed {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s: %v\n", n, failed[n])
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, b.String())
	})
	return mux
}

// ServeHTTP serves Handler on ln until ctx is cancelled, then shuts the
// server down and returns.
func (s *Server) ServeHTTP(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}
