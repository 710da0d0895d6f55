package agent_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// stopSample is one measured stop.
type stopSample struct {
	toStop   time.Duration // trigger → the job's context cancelled (stop recorded)
	toLast   time.Duration // trigger → the job's last side effect ended
	inFlight bool          // an upload was in flight at the trigger
}

// BenchmarkStopLatency measures the stop path of the agent over NATS on
// loopback, one stop per iteration (run with -benchtime=1000x or more):
//
//   - revoke: the job is working (screenshots uploaded at 4 MiB/s and
//     registered, without pause) when the coordinator publishes a revoke;
//   - stale: the coordinator's store starts refusing the token; the agent
//     learns it from the 409 to its next fenced call (a renewal every
//     ~200 ms, or the registration of a screenshot), measured from the
//     moment that first 409 is sent.
//
// The last side effect is the later of the last request for the job that
// reached the coordinator and the end of the last upload of the job (a
// completed PUT, or the moment an upload in flight was cut off). Reported:
// p50/p99/max of trigger → last side effect, and of trigger → stop.
func BenchmarkStopLatency(b *testing.B) {
	for _, mode := range []string{"revoke", "stale"} {
		b.Run(mode, func(b *testing.B) {
			st := rigSetup{ttl: 30 * time.Second, margin: 2 * time.Second, bps: 4 << 20, phones: benchPhones(b)}
			if mode == "stale" {
				// Renewals every ~200 ms, so that the first 409 is often the
				// answer to a renewal while an upload is in flight.
				st.ttl, st.margin = 600*time.Millisecond, 100*time.Millisecond
			}
			r := newRig(b, st)
			var samples []stopSample
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				samples = append(samples, stopOnce(b, r, mode))
			}
			b.StopTimer()
			report(b, samples)
			r.stop()
		})
	}
}

func benchPhones(tb testing.TB) agent.Phones {
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Width: 720, Height: 1280})); err != nil {
		tb.Fatal(err)
	}
	return agent.InventoryPhones(inv, "", capture.OpLogOptions{})
}

func stopOnce(b *testing.B, r *rig, mode string) stopSample {
	tok := r.token(1)
	steps := make([]protocol.Step, 200)
	for i := range steps {
		steps[i] = protocol.Step{Op: protocol.OpScreenshot}
	}
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: steps}); err != nil {
		b.Fatal(err)
	}
	// Let the job get going, then trigger at a random point of its work.
	for {
		n := 0
		for _, u := range r.store.uploads() {
			if strings.Contains(u.key, "/"+tok.JobID+"/") {
				n++
			}
		}
		if n >= 1 {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(time.Duration(rand.Int64N(int64(15 * time.Millisecond))))
	var trigger time.Time
	switch mode {
	case "revoke":
		trigger = time.Now()
		r.coord.revoke(tok)
	case "stale":
		r.coord.setStale(tok.JobID)
	}
	var stop agent.StopRecord
	for {
		var ok bool
		for _, s := range r.a.Stops() {
			if s.Token == tok {
				stop, ok = s, true
			}
		}
		if ok {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	for running := true; running; {
		running = false
		for _, j := range r.a.Jobs() {
			running = running || j.Token == tok
		}
		time.Sleep(100 * time.Microsecond)
	}
	if mode == "stale" {
		r.coord.mu.Lock()
		trigger = r.coord.firstStale[tok.JobID]
		r.coord.mu.Unlock()
	}
	last := trigger
	for _, q := range r.coord.requests(tok.JobID) {
		if q.at.After(last) {
			last = q.at
		}
	}
	inFlight := false
	for _, u := range r.store.uploads() {
		if !strings.Contains(u.key, "/"+tok.JobID+"/") {
			continue
		}
		if u.start.Before(trigger) && u.end.After(trigger) {
			inFlight = true
		}
		if u.end.After(last) {
			last = u.end
		}
	}
	return stopSample{toStop: max(0, stop.At.Sub(trigger)), toLast: last.Sub(trigger), inFlight: inFlight}
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func report(b *testing.B, samples []stopSample) {
	var last, stop []time.Duration
	inFlight := 0
	for _, s := range samples {
		last = append(last, s.toLast)
		stop = append(stop, s.toStop)
		if s.inFlight {
			inFlight++
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(last, 0.50)), "p50-last-effect-ms")
	b.ReportMetric(ms(pct(last, 0.99)), "p99-last-effect-ms")
	b.ReportMetric(ms(slices.Max(last)), "max-last-effect-ms")
	b.ReportMetric(ms(pct(stop, 0.50)), "p50-stop-ms")
	b.ReportMetric(ms(pct(stop, 0.99)), "p99-stop-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("%s: %d stops (%d with an upload in flight): trigger → last side effect p50 %v p99 %v max %v; trigger → stop p50 %v p99 %v",
		b.Name(), len(samples), inFlight, pct(last, 0.5), pct(last, 0.99), slices.Max(last), pct(stop, 0.5), pct(stop, 0.99))
}
