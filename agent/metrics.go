package agent

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// metrics are the agent's Prometheus metrics, in the registry of
// Options.Registry (a registry of its own when none is given). The upload
// counters of the uploader package (edgeagent_uploads_total,
// edgeagent_upload_bytes_total) count network uploads; the agent's count
// the artifacts its jobs stored, under names of their own.
type metrics struct {
	reg           *prometheus.Registry
	jobsRunning   prometheus.Gauge
	jobs          *prometheus.CounterVec
	stops         *prometheus.CounterVec
	failures      *prometheus.CounterVec
	renewals      *prometheus.CounterVec
	artifactBytes prometheus.Counter
	artifacts     *prometheus.CounterVec
	steps         *prometheus.CounterVec
	natsConnected prometheus.Gauge
	session       prometheus.Gauge
	draining      prometheus.Gauge
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		jobsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_jobs_running", Help: "Jobs running now.",
		}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_jobs_total", Help: "Jobs ended, by outcome (succeeded, failed, stopped, error).",
		}, []string{"outcome"}),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_job_stops_total", Help: "Jobs stopped, by cause (revoked, stale, lease_expired, cancelled, shutdown, released, deadline, outcome_unknown, unknown_job).",
		}, []string{"cause"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_job_failures_total", Help: "Fail reports the coordinator accepted (failures, deadlines and releases), by class (job, infrastructure) and cause.",
		}, []string{"class", "cause"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_lease_renewals_total", Help: "Lease renewals, by outcome (accepted, stale, failed).",
		}, []string{"outcome"}),
		artifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_artifact_bytes_total", Help: "Bytes of the artifacts jobs stored.",
		}),
		artifacts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_artifacts_total", Help: "Artifacts jobs handed to storage, by outcome (ok, error, stopped).",
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
	var errs []error
	for _, c := range []prometheus.Collector{m.jobsRunning, m.jobs, m.stops, m.failures, m.renewals, m.artifactBytes, m.artifacts, m.steps,
		m.natsConnected, m.session, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register agent metrics: %w", err)
	}
	// Every series is there from the start, at 0.
	for _, c := range []string{"revoked", "stale", "lease_expired", "cancelled", "shutdown", "released", "deadline", "outcome_unknown", "unknown_job"} {
		m.stops.WithLabelValues(c)
	}
	for _, c := range []string{protocol.CauseDeadline, protocol.CauseInvalidStep, protocol.CauseAppNotInstalled, protocol.CauseAssertion, protocol.CauseElementNotFound, protocol.CauseExtractFailed, protocol.CauseStepFailed} {
		m.failures.WithLabelValues(protocol.FailClassJob, c)
	}
	for _, c := range []string{protocol.CausePhoneUnplugged, protocol.CauseAdbServerGone, protocol.CauseStorageUnreachable, protocol.CauseAgentShutdown, protocol.CauseAgentSleep, protocol.CauseAgentUpdate} {
		m.failures.WithLabelValues(protocol.FailClassInfrastructure, c)
	}
	for _, o := range []string{"accepted", "stale", "failed"} {
		m.renewals.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "error", "stopped"} {
		m.artifacts.WithLabelValues(o)
	}
	for _, o := range []string{"succeeded", "failed", "stopped", "error"} {
		m.jobs.WithLabelValues(o)
	}
	for _, k := range []string{"task", "interactive"} {
		for _, o := range []string{"ok", "error"} {
			m.steps.WithLabelValues(k, o)
		}
	}
	return m, nil
}

// Registry returns the registry of the agent's metrics (Options.Registry
// when set).
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
	case errors.Is(err, ErrUnknownJob):
		return "unknown_job"
	case errors.Is(err, fencing.ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(err, ErrCancelled):
		return "cancelled"
	case errors.Is(err, ErrReleased):
		return "released"
	case errors.Is(err, ErrDeadline):
		return "deadline"
	case errors.Is(err, ErrShutdown):
		return "shutdown"
	}
	return "other"
}
