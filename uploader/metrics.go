package uploader

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the uploaders and the spool do. One Metrics is shared
// by every uploader and spool of a process; a nil *Metrics counts nothing.
// The agent daemon (agent.NewDaemon) registers them on the registry its
// status endpoint serves at /metrics, beside the agent's own metrics.
//
//	edgeagent_uploads_total{mode,outcome}        finished uploads; mode direct|presigned, outcome ok|existed|failed|canceled
//	edgeagent_upload_bytes_total                 content bytes handed to the network, re-sent bytes included
//	edgeagent_upload_parts_total{how}            multipart parts: sent (stored by a request of this process) or resumed (found stored, not sent again)
//	edgeagent_upload_retries_total{op}           requests tried again after a network or server failure
//	edgeagent_upload_multipart_aborted_total     multipart uploads aborted
//	edgeagent_upload_multipart_resumed_total     multipart uploads continued from stored parts
//	edgeagent_upload_inflight_bytes{kind}        uploads in progress: kind total (their sizes) and done (bytes stored or in flight)
//	edgeagent_spool_entries, edgeagent_spool_bytes   artifacts in the spool and their size
//	edgeagent_spool_dropped_total{reason}        spool entries dropped without being stored: stop, failed, previous_boot
type Metrics struct {
	uploads       *prometheus.CounterVec
	bytes         prometheus.Counter
	parts         *prometheus.CounterVec
	retries       *prometheus.CounterVec
	aborted       prometheus.Counter
	resumed       prometheus.Counter
	inflight      *prometheus.GaugeVec
	spoolEntries  prometheus.Gauge
	spoolBytes    prometheus.Gauge
	spoolDropped  *prometheus.CounterVec
	inflightDone  prometheus.Gauge
	inflightTotal prometheus.Gauge
}

// NewMetrics creates the collectors and registers them with reg; a nil reg
// registers nothing.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_uploads_total", Help: "Finished artifact uploads by mode and outcome.",
		}, []string{"mode", "outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_upload_bytes_total", Help: "Content bytes handed to the network, re-sent bytes included.",
		}),
		parts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_upload_parts_total", Help: "Multipart parts sent, or resumed (found stored and not sent again).",
		}, []string{"how"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_upload_retries_total", Help: "Storage requests tried again after a network or server failure.",
		}, []string{"op"}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_upload_multipart_aborted_total", Help: "Multipart uploads aborted.",
		}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_upload_multipart_resumed_total", Help: "Multipart uploads continued from the parts already stored.",
		}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeagent_upload_inflight_bytes", Help: "Uploads in progress: total is their size, done what is stored or in flight.",
		}, []string{"kind"}),
		spoolEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_spool_entries", Help: "Artifacts in the upload spool.",
		}),
		spoolBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_spool_bytes", Help: "Bytes of the artifacts in the upload spool.",
		}),
		spoolDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_spool_dropped_total", Help: "Spool entries dropped without being stored, by reason.",
		}, []string{"reason"}),
	}
	m.inflightDone = m.inflight.WithLabelValues("done")
	m.inflightTotal = m.inflight.WithLabelValues("total")
	// Every series is there from the start, at 0: a scrape shows each
	// metric before the first upload, and rates need no first sample.
	for _, mode := range []string{modeDirect, modePresigned} {
		for _, o := range []string{outcomeOK, outcomeExisted, outcomeFailed, outcomeCanceled} {
			m.uploads.WithLabelValues(mode, o)
		}
	}
	for _, how := range []string{"sent", "resumed"} {
		m.parts.WithLabelValues(how)
	}
	for _, op := range []string{"put", "part", "initiate", "complete", "list", "abort", "stat", "authorize"} {
		m.retries.WithLabelValues(op)
	}
	for _, reason := range []string{"stop", "failed", "previous_boot"} {
		m.spoolDropped.WithLabelValues(reason)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.uploads, m.bytes, m.parts, m.retries, m.aborted, m.resumed, m.inflight, m.spoolEntries, m.spoolBytes, m.spoolDropped} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register upload metrics: %w", err)
	}
	return m, nil
}

// Upload outcomes.
const (
	outcomeOK       = "ok"
	outcomeExisted  = "existed"
	outcomeFailed   = "failed"
	outcomeCanceled = "canceled"
)

// Upload modes.
const (
	modeDirect    = "direct"
	modePresigned = "presigned"
)

func (m *Metrics) finished(mode string, res Result, err error) {
	if m == nil {
		return
	}
	outcome := outcomeOK
	switch {
	case isCanceled(err):
		outcome = outcomeCanceled
	case err != nil:
		outcome = outcomeFailed
	case res.Existed:
		outcome = outcomeExisted
	}
	m.uploads.WithLabelValues(mode, outcome).Inc()
}

func (m *Metrics) sent(n int) {
	if m != nil && n > 0 {
		m.bytes.Add(float64(n))
	}
}

func (m *Metrics) part(how string) {
	if m != nil {
		m.parts.WithLabelValues(how).Inc()
	}
}

func (m *Metrics) retry(op string) {
	if m != nil {
		m.retries.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) abort() {
	if m != nil {
		m.aborted.Inc()
	}
}

func (m *Metrics) resume() {
	if m != nil {
		m.resumed.Inc()
	}
}

func (m *Metrics) inflightAdd(done, total int64) {
	if m == nil {
		return
	}
	if done != 0 {
		m.inflightDone.Add(float64(done))
	}
	if total != 0 {
		m.inflightTotal.Add(float64(total))
	}
}

func (m *Metrics) spoolAdd(entries int, bytes int64) {
	if m == nil {
		return
	}
	m.spoolEntries.Add(float64(entries))
	m.spoolBytes.Add(float64(bytes))
}

func (m *Metrics) dropped(reason string) {
	if m != nil {
		m.spoolDropped.WithLabelValues(reason).Inc()
	}
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
