package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// SSEOptions configure the sse scenario.
type SSEOptions struct {
	Common
	Drivers   []string
	Watchers  int             // concurrent SSE streams (default 1000)
	Events    int             // jobs submitted, one queued event each (default 200)
	Every     time.Duration   // between two submits (default 50ms)
	Intervals []time.Duration // broker poll intervals, one run each (default 100ms)
}

// SSERun is one store and poll interval.
type SSERun struct {
	Driver      string
	Interval    time.Duration
	Watchers    int
	Events      int
	Delivered   int64   // events received over all streams
	Delay       Summary // submit returned → event parsed by a watcher
	StoreReads  int64   // Events queries of the broker
	Window      time.Duration
	Connect     time.Duration // time to open every stream
	MissedOrDup int64         // events a stream did not get exactly once
}

// SSEReport is the result of the sse scenario.
type SSEReport struct{ Runs []SSERun }

// countingSource counts the broker's reads of the store.
type countingSource struct {
	events.Store
	reads atomic.Int64
}

func (c *countingSource) Events(ctx context.Context, q jobstore.EventQuery) ([]jobstore.Event, error) {
	if q.All {
		c.reads.Add(1)
	}
	return c.Store.Events(ctx, q)
}

// SSE runs the sse scenario: Watchers concurrent Server-Sent Events
// streams of one project over loopback HTTP on one broker, while jobs are
// submitted every Every; each watcher records, for every event, the time
// from the submit's return to the event's arrival.
func SSE(ctx context.Context, o SSEOptions) (*SSEReport, error) {
	if o.Watchers <= 0 {
		o.Watchers = 1000
	}
	if o.Events <= 0 {
		o.Events = 200
	}
	if o.Every <= 0 {
		o.Every = 50 * time.Millisecond
	}
	if len(o.Intervals) == 0 {
		o.Intervals = []time.Duration{100 * time.Millisecond}
	}
	dir, done, err := o.workDir("sse")
	if err != nil {
		return nil, err
	}
	defer done()
	rep := &SSEReport{}
	for _, d := range o.Drivers {
		for i, iv := range o.Intervals {
			st, closeStore, err := o.openStore(ctx, d, dir, fmt.Sprintf("sse-%d.db", i))
			if err != nil {
				return rep, err
			}
			if st == nil {
				continue
			}
			o.logf("sse: %s, %d watchers, poll every %s", d, o.Watchers, iv)
			r, err := sseRun(ctx, o, st, iv)
			closeStore()
			r.Driver = d
			rep.Runs = append(rep.Runs, r)
			if err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

func sseRun(ctx context.Context, o SSEOptions, st jobstore.Store, interval time.Duration) (SSERun, error) {
	r := SSERun{Interval: interval, Watchers: o.Watchers, Events: o.Events}
	src := &countingSource{Store: st}
	b := events.NewBroker(src, events.BrokerOptions{Interval: interval, Log: zerolog.Nop()})
	h := &events.Handlers{Broker: b, Store: st, Log: zerolog.Nop(),
		Projects: func(*http.Request) ([]string, bool) { return []string{events.AllProjects}, true }}
	mux := http.NewServeMux()
	h.Register(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	rctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { _ = b.Run(rctx) })
	bg.Go(func() { _ = srv.Serve(ln) })
	defer func() { stop(); _ = srv.Close(); bg.Wait() }()

	// Watchers.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Watchers, DisableCompression: true}}
	sent := sync.Map{} // job id → time the submit returned
	var delays Durations
	var delivered, bad atomic.Int64
	url := "http://" + ln.Addr().String() + "/api/v1/events?project=bench"
	var opened, watchers sync.WaitGroup
	opened.Add(o.Watchers)
	errs := make(chan error, o.Watchers)
	connStart := time.Now()
	for range o.Watchers {
		watchers.Go(func() {
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				opened.Done()
				errs <- err
				return
			}
			defer resp.Body.Close()
			opened.Done()
			seen := 0
			sc := bufio.NewReader(resp.Body)
			for seen < o.Events {
				line, err := sc.ReadString('\n')
				if err != nil {
					if !errors.Is(err, io.EOF) && rctx.Err() == nil {
						errs <- err
					}
					bad.Add(int64(o.Events - seen))
					return
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				at := time.Now()
				// Only the job id is needed: cut it out rather than decode
				// the event, so the watchers leave the CPU to the server.
				_, rest, ok := strings.Cut(data, `"job_id":"`)
				jobID, _, ok2 := strings.Cut(rest, `"`)
				if !ok || !ok2 {
					errs <- fmt.Errorf("event without job_id: %s", data)
					return
				}
				if v, ok := sent.Load(jobID); ok {
					delays.Add(max(at.Sub(v.(time.Time)), 0))
				}
				seen++
				delivered.Add(1)
			}
		})
	}
	opened.Wait()
	r.Connect = time.Since(connStart)
	select {
	case err := <-errs:
		return r, fmt.Errorf("open stream: %w", err)
	default:
	}
	for b.Subscribers() < o.Watchers {
		time.Sleep(10 * time.Millisecond)
	}
	reads0 := src.reads.Load()
	start := time.Now()
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot}}}
	tick := time.NewTicker(o.Every)
	for i := range o.Events {
		<-tick.C
		id := fmt.Sprintf("sse-%05d", i)
		sent.Store(id, time.Now()) // before the submit: the delay includes the write
		if _, err := st.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: "bench"}); err != nil {
			tick.Stop()
			return r, err
		}
	}
	tick.Stop()
	done := make(chan struct{})
	go func() { watchers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		stop()
		<-done
	}
	r.Window = time.Since(start)
	r.StoreReads = src.reads.Load() - reads0
	r.Delivered = delivered.Load()
	r.Delay = delays.Summary()
	r.MissedOrDup = int64(o.Watchers*o.Events) - r.Delivered + bad.Load()
	if r.Delivered != int64(o.Watchers*o.Events) {
		return r, fmt.Errorf("sse: %d events delivered, want %d", r.Delivered, o.Watchers*o.Events)
	}
	return r, nil
}

// PrintSSE prints the sse table.
func PrintSSE(w io.Writer, r *SSEReport) {
	t := Table{Title: "SSE watchers on one broker: event delay from the submit to the watcher",
		Header: []string{"store", "watchers", "poll", "events", "delivered", "delay p50 ms", "p99 ms", "max ms", "store reads/s", "connect all"}}
	for _, x := range r.Runs {
		perSec := float64(x.StoreReads) / x.Window.Seconds()
		t.Add(x.Driver, fmt.Sprint(x.Watchers), x.Interval.String(), fmt.Sprint(x.Events), fmt.Sprint(x.Delivered),
			ms(x.Delay.P50), ms(x.Delay.P99), ms(x.Delay.Max), fmt.Sprintf("%.1f", perSec), x.Connect.Round(time.Millisecond).String())
	}
	t.Notes = append(t.Notes, "one loopback HTTP server with the events handlers, one broker; every watcher is its own TCP connection parsing the stream; the delay includes the submit's write.")
	t.Print(w)
}
