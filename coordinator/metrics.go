package coordinator

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// metrics are the coordinator's Prometheus metrics, in a registry of its
// own. Counters count what this coordinator did; the gauges jobs and
// agents_online are read from the store at scrape time and so are the same
// on every coordinator sharing it (aggregate them with max, not sum).
type metrics struct {
	reg            *prometheus.Registry
	stale          *prometheus.CounterVec // verb
	forbidden      *prometheus.CounterVec // verb
	reclaimed      *prometheus.CounterVec // reason
	granted        *prometheus.CounterVec // how: claim, takeover, reassign
	requests       *prometheus.CounterVec // verb, code
	commits        prometheus.Counter
	revokes        prometheus.Counter
	assignFailures prometheus.Counter
	// assignsRequeued counts the refused assigns whose job went back to
	// the queue without spending an attempt.
	assignsRequeued prometheus.Counter
	attemptEnds     *prometheus.CounterVec // class, cause
	jobsEnded       *prometheus.CounterVec // state
	refused         *prometheus.CounterVec // agent, reason
}

func newMetrics(store jobstore.Store, offlineAfter time.Duration) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stale_token_rejected_total",
			Help: "Fenced requests refused with 409 because the token was not the job's current one, by verb.",
		}, []string{"verb"}),
		forbidden: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "forbidden_requests_total",
			Help: "Requests refused with 403 because the token belongs to another agent than the subject's, by verb.",
		}, []string{"verb"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leases_reclaimed_total",
			Help: "Leases taken back by this coordinator: expired on the database clock, or held by a restarted agent's previous boot.",
		}, []string{"reason"}),
		granted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leases_granted_total",
			Help: "Leases granted by this coordinator: claim of a queued job, takeover of an expired lease, operator reassignment.",
		}, []string{"how"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "requests_total",
			Help: "Agent requests answered by this coordinator, by verb and reply code (200 for success).",
		}, []string{"verb", "code"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commits_accepted_total",
			Help: "Results accepted by the fenced commit.",
		}),
		revokes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revokes_sent_total",
			Help: "Revokes published to agents.",
		}),
		assignFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "assign_failures_total",
			Help: "Assigns an agent did not accept; each job was released again at once.",
		}),
		assignsRequeued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "assigns_requeued_total",
			Help: "Assigns an agent refused because it or the phone was not ready (503); each job went back to the queue without spending an attempt.",
		}),
		attemptEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "attempt_ends_total",
			Help: "Attempts of jobs that ended without a result through this coordinator, by class (infrastructure, job) and cause.",
		}, []string{"class", "cause"}),
		jobsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_ended_total",
			Help: "Jobs this coordinator brought to an end state, by state (SUCCEEDED, FAILED, TIMED_OUT, NEEDS_DECISION).",
		}, []string{"state"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_requests_refused_total",
			Help: "Agent requests refused before any store work, by agent (\"unknown\" for an agent the store does not know) and reason: rate (the agent's request budget was spent; answered 503) or reply_subject (the reply subject was not the agent's own inbox; dropped).",
		}, []string{"agent", "reason"}),
	}
	m.reg.MustRegister(m.refused, m.stale, m.forbidden, m.reclaimed, m.granted, m.requests, m.commits, m.revokes, m.assignFailures, m.assignsRequeued,
		m.attemptEnds, m.jobsEnded,
		&storeCollector{store: store, offlineAfter: offlineAfter},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Verbs appear at zero before the first refusal, so rate() works.
	for _, v := range []string{jobstore.VerbRenew, jobstore.VerbUpload, jobstore.VerbArtifact, jobstore.VerbResult, jobstore.VerbFail} {
		m.stale.WithLabelValues(v)
		m.forbidden.WithLabelValues(v)
	}
	for _, r := range []string{"lease_expired", "agent_restarted"} {
		m.reclaimed.WithLabelValues(r)
		m.attemptEnds.WithLabelValues(protocol.FailClassInfrastructure, r)
	}
	m.attemptEnds.WithLabelValues(protocol.FailClassJob, protocol.CauseDeadline)
	for _, st := range []string{jobstore.StatusSucceeded, jobstore.StatusFailed, jobstore.StatusTimedOut, jobstore.StatusNeedsDecision} {
		m.jobsEnded.WithLabelValues(st)
	}
	return m
}

// attemptEnded counts one attempt that ended without a result.
func (m *metrics) attemptEnded(class, cause string) {
	m.attemptEnds.WithLabelValues(class, cause).Inc()
}

// jobEnded counts a job brought to state; a state that is not an end
// (QUEUED after a retry, "" when unknown) is not counted.
func (m *metrics) jobEnded(state string) {
	if slices.Contains(jobstore.Statuses, state) && jobstore.Finished(state) {
		m.jobsEnded.WithLabelValues(state).Inc()
	}
}

// refusedRequest counts an agent request refused before any store work;
// agent is a known agent's id or unknownAgent.
func (m *metrics) refusedRequest(agent, reason string) {
	m.refused.WithLabelValues(agent, reason).Inc()
}

func (m *metrics) request(verb string, code int) {
	m.requests.WithLabelValues(verb, strconv.Itoa(code)).Inc()
}

// storeCollector reads the job and agent gauges from the store at scrape
// time.
type storeCollector struct {
	store        jobstore.Store
	offlineAfter time.Duration
}

var (
	jobsDesc   = prometheus.NewDesc("jobs", "Jobs in the store by state.", []string{"state"}, nil)
	onlineDesc = prometheus.NewDesc("agents_online",
		"Agents heard from within the offline threshold (database clock).", nil, nil)
	registeredDesc = prometheus.NewDesc("agents_registered", "Agents in the registry.", nil, nil)
	projectDesc    = prometheus.NewDesc("project_jobs",
		"Queued and in-progress jobs by project, for the projects that have any.", []string{"project", "state"}, nil)
	scrapeErrDesc = prometheus.NewDesc("store_scrape_errors", "1 when the store could not be read for this scrape.", nil, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- onlineDesc
	ch <- registeredDesc
	ch <- projectDesc
	ch <- scrapeErrDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	failed := 0.0
	if counts, err := c.store.JobCounts(ctx); err == nil {
		for _, st := range jobstore.Statuses {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[st]), st)
		}
	} else {
		failed = 1
	}
	if pc, ok := c.store.(jobstore.ProjectCounter); ok {
		if counts, err := pc.ProjectJobCounts(ctx); err == nil {
			for _, n := range counts {
				ch <- prometheus.MustNewConstMetric(projectDesc, prometheus.GaugeValue, float64(n.N), n.Project, n.Status)
			}
		} else {
			failed = 1
		}
	}
	if agents, err := c.store.Agents(ctx); err == nil {
		online := 0
		for _, a := range agents {
			if a.Online(c.offlineAfter) {
				online++
			}
		}
		ch <- prometheus.MustNewConstMetric(onlineDesc, prometheus.GaugeValue, float64(online))
		ch <- prometheus.MustNewConstMetric(registeredDesc, prometheus.GaugeValue, float64(len(agents)))
	} else {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, failed)
}
