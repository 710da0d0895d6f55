package agent

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeagent/edgeagent/fencing"
)

// metrics are the agent's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg           *prometheus.Registry
	jobsRunning   prometheus.Gauge
	jobs          *prometheus.CounterVec
	stops         *prometheus.CounterVec
	renewals      *prometheus.CounterVec
	uploadBytes   prometheus.Counter
	uploads       *prometheus.CounterVec
	steps         *prometheus.CounterVec
	natsConnected prometheus.Gauge
	session       prometheus.Gauge
	draining      prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		jobsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_jobs_running", Help: "Jobs running now.",
		}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_jobs_total", Help: "Jobs ended, by outcome (succeeded, failed, stopped, error).",
		}, []string{"outcome"}),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_job_stops_total", Help: "Jobs stopped, by cause (revoked, stale, lease_expired, cancelled, shutdown, released, outcome_unknown).",
		}, []string{"cause"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_lease_renewals_total", Help: "Lease renewals, by outcome (accepted, stale, failed).",
		}, []string{"outcome"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_upload_bytes_total", Help: "Bytes of artifacts uploaded.",
		}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_uploads_total", Help: "Artifact uploads, by outcome (ok, error, stopped).",
		}, []string{"outcome"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_steps_total", Help: "Steps run, by kind (task, interactive) and outcome (ok, error).",
		}, []string{"kind", "outcome"}),
		natsConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_nats_connected", Help: "1 while the NATS connection is up.",
		}),
		session: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_coordinator_session", Help: "1 while the coordinator has accepted the agent's hello on the current connection.",
		}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_draining", Help: "1 while the agent takes no new jobs (drain or shutdown).",
		}),
	}
	m.reg.MustRegister(m.jobsRunning, m.jobs, m.stops, m.renewals, m.uploadBytes, m.uploads, m.steps,
		m.natsConnected, m.session, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range []string{"revoked", "stale", "lease_expired", "cancelled", "shutdown", "released", "outcome_unknown"} {
		m.stops.WithLabelValues(c)
	}
	for _, o := range []string{"accepted", "stale", "failed"} {
		m.renewals.WithLabelValues(o)
	}
	return m
}

// Registry returns the registry of the agent's metrics.
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.reg }

// stopLabel maps a stop cause to its metric label.
func stopLabel(err error) string {
	switch {
	case errors.Is(err, fencing.ErrRevoked):
		return "revoked"
	case errors.Is(err, ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, fencing.ErrStale):
		return "stale"
	case errors.Is(err, fencing.ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(err, ErrCancelled):
		return "cancelled"
	case errors.Is(err, ErrReleased):
		return "released"
	case errors.Is(err, ErrShutdown):
		return "shutdown"
	}
	return "other"
}
