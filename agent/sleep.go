package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeagent/edgeagent/agent/power"
	"github.com/edgeagent/edgeagent/protocol"
)

// The PC's sleep (docs/operations.md, "Sleep"): while a job runs the agent
// holds the OS's sleep inhibitor; when the PC is about to sleep anyway it
// tells the coordinator it takes no new job, hands its running jobs back
// with a fenced fail (requeue, cause agent_sleep: the coordinator grants
// them again at once, without the retry backoff) and lets the sleep
// proceed; on wake it says hello again.

// reasonSleep is the fail reason of a job handed back before the PC sleeps.
const reasonSleep = "the agent's PC is going to sleep"

// sleepMetrics are the metrics of the sleep inhibitor.
type sleepMetrics struct {
	held   prometheus.Gauge
	events *prometheus.CounterVec
}

func newSleepMetrics(reg *prometheus.Registry) (*sleepMetrics, error) {
	m := &sleepMetrics{
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_sleep_inhibitor_held", Help: "1 while the agent holds the OS's sleep inhibitor (a job runs).",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_sleep_events_total", Help: "The PC's power events the agent saw, by event (suspend, resume).",
		}, []string{"event"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.held, m.events} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register sleep metrics: %w", err)
	}
	for _, e := range []string{"suspend", "resume"} {
		m.events.WithLabelValues(e)
	}
	return m, nil
}

// startInhibitor opens the OS's sleep inhibitor when the config asks for
// it (sleep.inhibit) and keeps it held while jobs run, until ctx is done.
// Without one (no systemd-logind, another OS) the agent runs on and says
// so.
func (d *Daemon) startInhibitor(ctx context.Context, wg *sync.WaitGroup) {
	if !d.cfg.Sleep.Inhibit {
		return
	}
	a, m := d.agent, d.sleepM
	inh, err := power.Open(power.Options{
		Log: d.log.With().Str("component", "power").Logger(),
		Suspend: func(ctx context.Context) {
			m.events.WithLabelValues("suspend").Inc()
			a.prepareForSleep(ctx)
		},
		Resume: func() {
			m.events.WithLabelValues("resume").Inc()
			a.woke()
		},
		OnHeld: func(held bool) { m.held.Set(b2f(held)) },
	})
	if err != nil {
		d.log.Warn().Err(err).Msg("no sleep inhibitor: the PC may sleep in the middle of a job (sleep.inhibit)")
		return
	}
	wg.Go(func() {
		a.keepAwake(ctx, inh)
		if err := inh.Close(); err != nil {
			d.log.Debug().Err(err).Msg("close the sleep inhibitor")
		}
	})
}

// keepAwake holds inh while at least one job runs, until ctx is done.
func (a *Agent) keepAwake(ctx context.Context, inh *power.Inhibitor) {
	held := false
	for {
		a.mu.Lock()
		n, ch := len(a.jobs), a.changed
		a.mu.Unlock()
		if want := n > 0; want != held {
			held = want
			if err := inh.Hold(want, "edgeagent is running a job"); err != nil {
				a.log.Warn().Err(err).Msg("sleep inhibitor")
			} else {
				a.log.Debug().Bool("held", want).Int("running", n).Msg("sleep inhibitor")
			}
		}
		select {
		case <-ctx.Done():
			if held {
				_ = inh.Hold(false, "")
			}
			return
		case <-ch:
		}
	}
}

// prepareForSleep runs when the PC is about to sleep, until ctx is done at
// the latest: the agent takes no new job and says so in a heartbeat, then
// hands every running job back (its work is cut short, then a fenced fail
// with requeue and cause agent_sleep) and waits for them to end.
func (a *Agent) prepareForSleep(ctx context.Context) {
	a.mu.Lock()
	a.sleeping = true
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	a.log.Info().Int("running", len(jobs)).Msg("the PC is going to sleep: taking no new job, handing the running jobs back")
	// First tell the coordinator that no job is to come here, so that it
	// grants the jobs handed back to another agent; a third of the time
	// at most.
	hctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, time.Until(dl)/3)
		defer cancel()
	}
	if err := a.heartbeat(hctx); err != nil {
		a.log.Debug().Err(err).Msg("heartbeat before sleep")
	}
	for _, j := range jobs {
		j.releaseFor(reasonSleep, protocol.CauseAgentSleep)
	}
	if !a.waitJobs(ctx) {
		a.log.Warn().Msg("running jobs were not handed back before the PC slept: their leases expire")
	}
}

// woke runs when the PC woke up: the agent takes jobs again and says hello.
func (a *Agent) woke() {
	a.mu.Lock()
	a.sleeping = false
	a.mu.Unlock()
	a.log.Info().Msg("the PC woke up: saying hello again")
	a.kickHello()
}

// releaseFor is release with the fail's cause.
func (j *job) releaseFor(reason, cause string) {
	j.mu.Lock()
	if j.releasing == "" {
		j.releasing, j.releaseCause = reason, cause
	}
	j.mu.Unlock()
	j.cancelWork(errReleased)
}
