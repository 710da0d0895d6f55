package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgeagent/edgeagent/protocol"
)

// Agent states in the status document.
const (
	StateRunning      = "running"
	StateDraining     = "draining"
	StateShuttingDown = "shutting_down"
	StateStopped      = "stopped"
)

// Status returns the status document: connection, running jobs with their
// tokens and lease time left, phones, settings, recent stops and errors.
func (a *Agent) Status() protocol.AgentStatus {
	phones := a.opts.Phones.Inventory()
	busy, _ := a.opts.Phones.(BusyReporter)
	a.mu.Lock()
	st := protocol.AgentStatus{
		AgentID: a.opts.AgentID, BootID: a.bootID, Owner: a.owner, Version: a.opts.Version,
		Started: a.started.UTC(), State: StateRunning, Slots: a.slots,
		Settings: a.settings, Connection: a.sess, Jobs: []protocol.AgentJob{}, Phones: []protocol.AgentPhone{},
	}
	switch {
	case !a.running || a.closing:
		st.State = StateStopped
	case a.shutdown:
		st.State = StateShuttingDown
	case a.draining, a.upd.running:
		st.State = StateDraining
	}
	st.Update = a.updateStatusLocked()
	if st.State == StateRunning {
		st.Free = max(0, a.slots-a.busyLocked())
	}
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	for _, r := range a.stops[max(0, len(a.stops)-10):] {
		st.Stops = append(st.Stops, protocol.AgentStop{Token: r.Token, Cause: r.Cause, At: r.At.UTC(), CutShort: r.CutShort})
	}
	st.Errors = append(st.Errors, a.errs[max(0, len(a.errs)-10):]...)
	a.mu.Unlock()
	for _, j := range jobs {
		st.Jobs = append(st.Jobs, j.doc())
	}
	slices.SortFunc(st.Jobs, func(x, y protocol.AgentJob) int { return strings.Compare(x.Token.JobID, y.Token.JobID) })
	for _, d := range phones {
		p := protocol.AgentPhone{Device: d}
		if busy != nil {
			p.Busy = busy.Busy(d.Serial)
		}
		st.Phones = append(st.Phones, p)
	}
	return st
}

// StatusHandler serves /metrics (Prometheus), /healthz (the process
// answers), /readyz (200 while NATS is connected and the coordinator
// accepted the hello, else 503) and /status (the status document as JSON).
func (a *Agent) StatusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		a.mu.Lock()
		s := a.sess
		shutdown := a.shutdown
		a.mu.Unlock()
		switch {
		case !s.NATSConnected:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: NATS not connected")
		case !s.HelloAccepted:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: coordinator has not accepted hello")
		case shutdown:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: shutting down")
		default:
			fmt.Fprintln(w, "ready")
		}
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.Status())
	})
	return mux
}

// ErrNotLoopback refuses a status address other than a loopback one.
var ErrNotLoopback = errors.New("status endpoint must listen on a loopback address")

// ListenStatus listens on addr, which must be a loopback address
// (127.0.0.0/8, ::1 or localhost): the status endpoint has no
// authentication.
func ListenStatus(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen status %q: %w", addr, err)
	}
	if !strings.EqualFold(host, "localhost") {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("listen status %q: %w", addr, ErrNotLoopback)
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen status: %w", err)
	}
	if ip := l.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		l.Close()
		return nil, fmt.Errorf("listen status %q: %w", addr, ErrNotLoopback)
	}
	return l, nil
}

// ServeStatus serves StatusHandler on l until ctx is done, then shuts the
// server down and closes l.
func (a *Agent) ServeStatus(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: a.StatusHandler(), ReadHeaderTimeout: 5 * time.Second}
	done, served := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
		case <-served:
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	close(served)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve status: %w", err)
}
