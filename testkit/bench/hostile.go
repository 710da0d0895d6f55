package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/gobuild"
)

// HostileOptions configure the hostile scenario. The coordinator runs with
// the default limits of docs/security.md ("Limits of the HTTP API", "Agent
// request budget"); only ReadTimeout may shorten api.read_timeout.
type HostileOptions struct {
	Common
	// CoordBin is the edgecoord binary; empty builds it with `go build`.
	CoordBin string
	// Jobs is the well-behaved workload of each phase: one-step jobs
	// submitted through the API every JobEvery (default 100, 250ms).
	Jobs     int
	JobEvery time.Duration
	// Heartbeat is agents.heartbeat, how often the agents beat (default
	// 200ms).
	Heartbeat time.Duration
	// Streams event-stream attempts (default 2000), half on
	// /api/v1/events and half on /ui/events, spread over StreamTokens read
	// tokens (default 80).
	Streams      int
	StreamTokens int
	// FloodRate heartbeats a second (default 20000) of the flooding agent,
	// at most FloodMax of them (default 2,000,000).
	FloodRate int
	FloodMax  int
	// SlowBodies connections (default 50) send a request body at one
	// byte a second, for at most SlowFor (default ReadTimeout + 15s).
	SlowBodies int
	SlowFor    time.Duration
	// ReadTimeout is api.read_timeout (default: the config's default,
	// 30s).
	ReadTimeout time.Duration
}

// HostilePhase is what one phase measured.
type HostilePhase struct {
	Name       string
	Window     time.Duration
	Heartbeat  Summary // round trip of the well-behaved agent's heartbeats
	HBFailed   int     // heartbeats not answered
	Job        Summary // submit sent → the agent's result accepted
	Jobs       int
	Succeeded  int // jobs the API reports SUCCEEDED
	RSSStart   int64
	RSSMax     int64 // sampled every 100ms
	HWM        int64 // VmHWM at the phase's end
	Goroutines int   // most seen on /metrics (go_goroutines)
	Threads    int

	// Hostile phase only.
	StreamsAdmitted, StreamsRefused, StreamsOther int
	RefusedBy                                     map[string]int // 429s by what they named
	StreamsOpenAtEnd                              int64
	// RSSStreamsOpen is the coordinator's RSS once every stream attempt
	// was answered, before the well-behaved workload sends events.
	RSSStreamsOpen int64
	// HeapStreamsOpen and StackStreamsOpen are the Go heap and goroutine
	// stacks in use at that moment (go_memstats_*_inuse_bytes).
	HeapStreamsOpen, StackStreamsOpen int64
	FloodSent, FloodRefused           int64
	SlowCut, SlowOpen, SlowOther      int
	SlowCutAfter                      Summary
}

// HostileReport is the result of the hostile scenario.
type HostileReport struct {
	Machine Machine
	Options HostileOptions
	Quiet   HostilePhase
	Hostile HostilePhase
}

// Hostile runs the hostile scenario against the real `edgecoord serve` in
// a process of its own (SQLite store, HTTP API and dashboard on, default
// limits): a quiet phase where one well-behaved protocol-level agent with
// a simulated phone runs Jobs one-step jobs submitted through the API while
// it heartbeats, then a hostile phase with the same workload while, at
// once, Streams event-stream attempts, a flooding agent and SlowBodies
// slow-body clients press on the coordinator. It returns an error when a
// job of the well-behaved agent did not succeed.
func Hostile(ctx context.Context, o HostileOptions) (*HostileReport, error) {
	if o.Jobs <= 0 {
		o.Jobs = 100
	}
	if o.JobEvery <= 0 {
		o.JobEvery = 250 * time.Millisecond
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 200 * time.Millisecond
	}
	if o.Streams <= 0 {
		o.Streams = 2000
	}
	if o.StreamTokens <= 0 {
		o.StreamTokens = 80
	}
	if o.FloodRate <= 0 {
		o.FloodRate = 20000
	}
	if o.FloodMax <= 0 {
		o.FloodMax = 2_000_000
	}
	if o.SlowBodies <= 0 {
		o.SlowBodies = 50
	}
	readTimeout := o.ReadTimeout
	if readTimeout <= 0 {
		readTimeout = 30 * time.Second
	}
	if o.SlowFor <= 0 {
		o.SlowFor = readTimeout + 15*time.Second
	}
	rep := &HostileReport{Machine: DescribeMachine(), Options: o}

	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "edgebench-hostile-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else {
		dir = filepath.Join(dir, "hostile")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	bin := o.CoordBin
	if bin == "" {
		o.logf("hostile: go build ./cmd/edgecoord")
		var err error
		if bin, err = gobuild.Build(ctx, "edgecoord", gobuild.Options{}); err != nil {
			return nil, fmt.Errorf("build edgecoord: %w", err)
		}
	}

	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("start nats server: %w", err)
	}
	go ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("start nats server: not ready")
	}

	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	cfg := fmt.Sprintf(`coordinator_id: bench-hostile
log:
  level: warn
nats:
  url: %s
store:
  driver: sqlite
  path: %s
scheduler:
  interval: 100ms
agents:
  heartbeat: %s
  offline_after: 10s
metrics:
  listen: 127.0.0.1:%d
api:
  listen: 127.0.0.1:%d
`, ns.ClientURL(), filepath.Join(dir, "edgecoord.db"), o.Heartbeat, metricsPort, apiPort)
	if o.ReadTimeout > 0 {
		cfg += fmt.Sprintf("  read_timeout: %s\n", o.ReadTimeout)
	}
	cfgPath := filepath.Join(dir, "edgecoord.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}

	// The store and the tokens, made with the CLI before the coordinator
	// starts.
	if out, err := exec.CommandContext(ctx, bin, "migrate", "-c", cfgPath).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("edgecoord migrate: %v: %s", err, out)
	}
	o.logf("hostile: %d tokens", o.StreamTokens+2)
	token := func(name, scopes string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "token", "create", "--name", name, "--project", "bench", "--scopes", scopes, "-c", cfgPath)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("edgecoord token create %s: %v: %s", name, err, errOut.String())
		}
		return strings.TrimSpace(out.String()), nil
	}
	writer, err := token("bench-writer", "read,submit")
	if err != nil {
		return nil, err
	}
	slowTok, err := token("bench-slow", "read,submit")
	if err != nil {
		return nil, err
	}
	readers := make([]string, o.StreamTokens)
	for i := range readers {
		if readers[i], err = token(fmt.Sprintf("bench-reader-%03d", i), "read"); err != nil {
			return nil, err
		}
	}

	// The coordinator.
	logFile, err := os.Create(filepath.Join(dir, "edgecoord.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "-c", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start edgecoord serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	probe := &http.Client{Timeout: 5 * time.Second}
	ready := func(url string) bool {
		resp, err := probe.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(60 * time.Second); !ready(fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort)) || !ready(base+"/api/v1/openapi.json"); {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("edgecoord serve exited before it was ready: %v (see %s)", err, logFile.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, errors.New("edgecoord serve not ready after 60s")
		}
	}
	pid := cmd.Process.Pid

	// RSS every 100ms, goroutines every second, into the current phase.
	var (
		phaseMu  sync.Mutex
		cur      *HostilePhase
		sampling sync.WaitGroup
		hbMu     sync.Mutex
		hbPhase  *Durations // the current phase's heartbeat round trips
		hbFailed *int
	)
	sctx, stopSampling := context.WithCancel(ctx)
	defer func() { stopSampling(); sampling.Wait() }()
	sampling.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			s := SampleProc(pid)
			g := -1
			if n++; n%10 == 0 {
				if v, ok := scrapeMetric(probe, metrics, "go_goroutines "); ok {
					g = int(v)
				}
			}
			phaseMu.Lock()
			if cur != nil && s.OK {
				cur.RSSMax = max(cur.RSSMax, s.RSS)
				cur.Threads = max(cur.Threads, s.Threads)
				cur.Goroutines = max(cur.Goroutines, g)
			}
			phaseMu.Unlock()
		}
	})
	begin := func(p *HostilePhase) {
		s := SampleProc(pid)
		g, _ := scrapeMetric(probe, metrics, "go_goroutines ")
		phaseMu.Lock()
		p.RSSStart, p.RSSMax, p.Threads, p.Goroutines = s.RSS, s.RSS, s.Threads, int(g)
		cur = p
		phaseMu.Unlock()
		hbMu.Lock()
		hbPhase, hbFailed = &Durations{}, &p.HBFailed
		hbMu.Unlock()
	}
	// end ends the phase once it has seen three heartbeats at least (or
	// ten heartbeat intervals went by).
	end := func(p *HostilePhase) {
		for deadline := time.Now().Add(10 * o.Heartbeat); time.Now().Before(deadline) && ctx.Err() == nil; {
			hbMu.Lock()
			n := hbPhase.Summary().N + *hbFailed
			hbMu.Unlock()
			if n >= 3 {
				break
			}
			sleepCtx(ctx, o.Heartbeat/4)
		}
		hbMu.Lock()
		p.Heartbeat = hbPhase.Summary()
		hbPhase, hbFailed = nil, nil
		hbMu.Unlock()
		g, _ := scrapeMetric(probe, metrics, "go_goroutines ")
		phaseMu.Lock()
		p.Goroutines = max(p.Goroutines, int(g))
		cur = nil
		phaseMu.Unlock()
		p.HWM = SampleProc(pid).HWM
	}

	// The well-behaved agent.
	var (
		resMu    sync.Mutex
		results  = map[string]time.Time{}
		resultCh = make(chan struct{}, 1)
	)
	stats := &agentStats{}
	stats.onResult = func(id string, at time.Time) {
		resMu.Lock()
		results[id] = at
		resMu.Unlock()
		select {
		case resultCh <- struct{}{}:
		default:
		}
	}
	stats.onHeartbeat = func(_ time.Time, rtt time.Duration, err error) {
		hbMu.Lock()
		defer hbMu.Unlock()
		if hbPhase == nil {
			return
		}
		if err != nil {
			*hbFailed++
			return
		}
		hbPhase.Add(rtt)
	}
	goodNC, err := nats.Connect(ns.ClientURL(), nats.Name("bench pc-good"), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-good")))
	if err != nil {
		return nil, err
	}
	defer goodNC.Close()
	phone := capture.NewSimulated(capture.SimOptions{Serial: "sim-good", Model: "Pixel 8"})
	good := newSimAgent("pc-good", goodNC, phone, 1, 0, stats)
	if err := good.start(ctx); err != nil {
		return nil, err
	}
	defer good.stop()
	for stats.heartbeats.Load() < 3 {
		sleepCtx(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}

	api := &http.Client{Timeout: 60 * time.Second}
	// workload submits o.Jobs jobs every o.JobEvery and waits for their
	// results; it returns each job's completion time.
	workload := func(p *HostilePhase, prefix string) ([]string, error) {
		var jobs Durations
		defer func() { p.Job = jobs.Summary() }()
		sent := map[string]time.Time{}
		var ids []string
		tick := time.NewTicker(o.JobEvery)
		defer tick.Stop()
		start := time.Now()
		for i := range o.Jobs {
			id := fmt.Sprintf("%s-%04d", prefix, i)
			ids = append(ids, id)
			body := fmt.Sprintf(`{"id":%q,"project":"bench","max_attempts":1,"steps":[{"op":"tap","x":10,"y":20}]}`, id)
			sent[id] = time.Now()
			if err := submitJob(ctx, api, base, writer, body); err != nil {
				return ids, err
			}
			select {
			case <-ctx.Done():
				return ids, ctx.Err()
			case <-tick.C:
			}
		}
		p.Jobs = o.Jobs
		deadline := time.After(2 * time.Minute)
		for {
			resMu.Lock()
			n := 0
			for _, id := range ids {
				if _, ok := results[id]; ok {
					n++
				}
			}
			resMu.Unlock()
			if n == len(ids) {
				break
			}
			select {
			case <-resultCh:
			case <-deadline:
				o.logf("hostile: %d of %d results after 2 minutes", n, len(ids))
				goto done
			case <-ctx.Done():
				return ids, ctx.Err()
			}
		}
	done:
		p.Window = time.Since(start)
		resMu.Lock()
		for _, id := range ids {
			if at, ok := results[id]; ok {
				jobs.Add(at.Sub(sent[id]))
			}
		}
		resMu.Unlock()
		return ids, nil
	}

	// Quiet.
	o.logf("hostile: quiet phase, %d jobs", o.Jobs)
	rep.Quiet.Name = "quiet"
	begin(&rep.Quiet)
	quietIDs, err := workload(&rep.Quiet, "quiet")
	end(&rep.Quiet)
	if err != nil {
		return rep, err
	}

	// Hostile.
	h := &rep.Hostile
	h.Name = "hostile"
	h.RefusedBy = map[string]int{}
	begin(h)
	hctx, stopHostile := context.WithCancel(ctx)
	defer stopHostile()
	var hostile sync.WaitGroup

	// The flooding agent: its own heartbeats, each naming its own inbox.
	// They report no free slot: a heartbeat with a free slot wakes the
	// scheduler, which would hand the well-behaved agent its jobs sooner
	// than in the quiet phase.
	floodNC, err := nats.Connect(ns.ClientURL(), nats.Name("bench pc-flood"), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-flood")))
	if err != nil {
		return rep, err
	}
	defer floodNC.Close()
	{
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := natsrpc.Request(rctx, floodNC, protocol.CoordSubject("pc-flood", protocol.VerbHello),
			protocol.Hello{BootID: "flood", Version: "bench", Slots: 1, Devices: []protocol.Device{}}, &protocol.HelloReply{})
		cancel()
		if err != nil {
			return rep, fmt.Errorf("flooding agent hello: %w", err)
		}
	}
	refused0, _ := scrapeMetric(probe, metrics, `agent_requests_refused_total{agent="pc-flood",reason="rate"} `)
	var floodSent atomic.Int64
	hostile.Go(func() {
		body, _ := json.Marshal(protocol.Heartbeat{BootID: "flood"})
		subj := protocol.CoordSubject("pc-flood", protocol.VerbHeartbeat)
		reply := protocol.InboxPrefix("pc-flood") + ".flood"
		const tickEvery = 10 * time.Millisecond
		batch := max(1, o.FloodRate/100)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for floodSent.Load() < int64(o.FloodMax) {
			for range batch {
				if err := floodNC.PublishMsg(&nats.Msg{Subject: subj, Reply: reply, Data: body}); err != nil {
					return
				}
			}
			floodSent.Add(int64(batch))
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
		}
	})

	// Event streams: every attempt at once, the admitted ones read to the
	// end of the phase.
	streamTr := &http.Transport{MaxIdleConnsPerHost: o.Streams, DisableCompression: true, ResponseHeaderTimeout: 60 * time.Second}
	defer streamTr.CloseIdleConnections()
	streamClient := &http.Client{Transport: streamTr}
	var (
		stMu     sync.Mutex
		answered sync.WaitGroup
		open     atomic.Int64
	)
	answered.Add(o.Streams)
	for i := range o.Streams {
		path := "/api/v1/events?project=bench"
		if i%2 == 1 {
			path = "/ui/events"
		}
		tok := readers[i%len(readers)]
		hostile.Go(func() {
			once := sync.OnceFunc(answered.Done)
			defer once()
			req, _ := http.NewRequestWithContext(hctx, http.MethodGet, base+path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := streamClient.Do(req)
			if err != nil {
				stMu.Lock()
				h.StreamsOther++
				stMu.Unlock()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				stMu.Lock()
				h.StreamsAdmitted++
				stMu.Unlock()
				open.Add(1)
				defer open.Add(-1)
				once()
				_, _ = io.Copy(io.Discard, resp.Body)
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			stMu.Lock()
			defer stMu.Unlock()
			if resp.StatusCode != http.StatusTooManyRequests {
				h.StreamsOther++
				return
			}
			h.StreamsRefused++
			switch s := string(b); {
			case strings.Contains(s, "max_streams_per_token"):
				h.RefusedBy["api.max_streams_per_token"]++
			case strings.Contains(s, "max_streams"):
				h.RefusedBy["api.max_streams"]++
			default:
				h.RefusedBy["rate"]++
			}
		})
	}

	// Slow bodies: half with a token, half without.
	type slowEnd struct {
		cut   bool
		after time.Duration
		err   bool
	}
	slowEnds := make(chan slowEnd, o.SlowBodies)
	addr := fmt.Sprintf("127.0.0.1:%d", apiPort)
	for i := range o.SlowBodies {
		auth := ""
		if i%2 == 0 {
			auth = "Authorization: Bearer " + slowTok + "\r\n"
		}
		hostile.Go(func() {
			start := time.Now()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				slowEnds <- slowEnd{err: true}
				return
			}
			defer c.Close()
			head := "POST /api/v1/jobs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n" + auth + "\r\n"
			if _, err := io.WriteString(c, head); err != nil {
				slowEnds <- slowEnd{err: true}
				return
			}
			got := make(chan struct{})
			go func() {
				var b [512]byte
				_, _ = c.Read(b[:])
				close(got)
			}()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			bound := time.After(o.SlowFor)
			for {
				select {
				case <-got:
					slowEnds <- slowEnd{cut: true, after: time.Since(start)}
					return
				case <-bound:
					slowEnds <- slowEnd{}
					return
				case <-ctx.Done():
					slowEnds <- slowEnd{}
					return
				case <-t.C:
					if _, err := c.Write([]byte{' '}); err != nil {
						<-got // the server closed it: the read ends too
						slowEnds <- slowEnd{cut: true, after: time.Since(start)}
						return
					}
				}
			}
		})
	}

	// The well-behaved workload starts once every stream attempt was
	// answered (admitted or refused) and the flood is under way.
	o.logf("hostile: %d stream attempts, flood at %d/s, %d slow bodies", o.Streams, o.FloodRate, o.SlowBodies)
	answeredCh := make(chan struct{})
	go func() { answered.Wait(); close(answeredCh) }()
	select {
	case <-answeredCh:
	case <-time.After(2 * time.Minute):
		o.logf("hostile: not every stream attempt answered after 2 minutes")
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	h.RSSStreamsOpen = SampleProc(pid).RSS
	if v, ok := scrapeMetric(probe, metrics, "go_memstats_heap_inuse_bytes "); ok {
		h.HeapStreamsOpen = int64(v)
	}
	if v, ok := scrapeMetric(probe, metrics, "go_memstats_stack_inuse_bytes "); ok {
		h.StackStreamsOpen = int64(v)
	}
	o.logf("hostile: streams %d admitted, %d refused; well-behaved workload, %d jobs", h.StreamsAdmitted, h.StreamsRefused, o.Jobs)
	hostileIDs, werr := workload(h, "hostile")
	var cuts Durations
	for range o.SlowBodies {
		e := <-slowEnds
		switch {
		case e.cut:
			h.SlowCut++
			cuts.Add(e.after)
		case e.err:
			h.SlowOther++
		default:
			h.SlowOpen++
		}
	}
	h.SlowCutAfter = cuts.Summary()
	end(h)
	h.StreamsOpenAtEnd = open.Load()
	stopHostile()
	hostile.Wait()
	h.FloodSent = floodSent.Load()
	refused1, _ := scrapeMetric(probe, metrics, `agent_requests_refused_total{agent="pc-flood",reason="rate"} `)
	h.FloodRefused = int64(refused1 - refused0)
	if werr != nil {
		return rep, werr
	}

	// Nothing lost: every job of the well-behaved agent SUCCEEDED.
	var lost []string
	count := func(p *HostilePhase, ids []string) error {
		for _, id := range ids {
			st, err := jobStatus(ctx, api, base, writer, id)
			if err != nil {
				return err
			}
			if st == "SUCCEEDED" {
				p.Succeeded++
			} else {
				lost = append(lost, id+" "+st)
			}
		}
		return nil
	}
	if err := count(&rep.Quiet, quietIDs); err != nil {
		return rep, err
	}
	if err := count(h, hostileIDs); err != nil {
		return rep, err
	}
	if len(lost) > 0 {
		return rep, fmt.Errorf("hostile: %d jobs of the well-behaved agent did not succeed: %s", len(lost), strings.Join(lost, ", "))
	}
	return rep, nil
}

// submitJob posts body to /api/v1/jobs, again after a 429's Retry-After.
func submitJob(ctx context.Context, c *http.Client, base, token, body string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated:
			return nil
		case resp.StatusCode == http.StatusTooManyRequests:
			sleepCtx(ctx, retryAfter(resp))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		default:
			return fmt.Errorf("submit: %d %s", resp.StatusCode, b)
		}
	}
}

// jobStatus reads a job's status from the API, again after a 429.
func jobStatus(ctx context.Context, c *http.Client, base, token, id string) (string, error) {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/jobs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return "", fmt.Errorf("get job %s: %w", id, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var j struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(b, &j); err != nil {
				return "", fmt.Errorf("get job %s: %w", id, err)
			}
			return j.Status, nil
		case http.StatusTooManyRequests:
			sleepCtx(ctx, retryAfter(resp))
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
		default:
			return "", fmt.Errorf("get job %s: %d %s", id, resp.StatusCode, b)
		}
	}
}

func retryAfter(resp *http.Response) time.Duration {
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 100 * time.Millisecond
}

// scrapeMetric reads the value of the /metrics line starting with prefix.
func scrapeMetric(c *http.Client, url, prefix string) (float64, bool) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// PrintHostile prints the hostile table.
func PrintHostile(w io.Writer, r *HostileReport) {
	q, h := r.Quiet, r.Hostile
	ratio := func(a, b time.Duration) string {
		if a <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", float64(b)/float64(a))
	}
	t := Table{Title: "A well-behaved agent beside a hostile crowd (one edgecoord process, default limits)",
		Header: []string{"", "quiet", "hostile", "hostile/quiet"}}
	t.Add("heartbeat round trip p50 ms", ms(q.Heartbeat.P50), ms(h.Heartbeat.P50), ratio(q.Heartbeat.P50, h.Heartbeat.P50))
	t.Add("heartbeat round trip p99 ms", ms(q.Heartbeat.P99), ms(h.Heartbeat.P99), ratio(q.Heartbeat.P99, h.Heartbeat.P99))
	t.Add("heartbeats answered / not", fmt.Sprintf("%d / %d", q.Heartbeat.N, q.HBFailed), fmt.Sprintf("%d / %d", h.Heartbeat.N, h.HBFailed), "")
	t.Add("job completion p50 ms", ms(q.Job.P50), ms(h.Job.P50), ratio(q.Job.P50, h.Job.P50))
	t.Add("job completion p99 ms", ms(q.Job.P99), ms(h.Job.P99), ratio(q.Job.P99, h.Job.P99))
	t.Add("jobs SUCCEEDED / submitted", fmt.Sprintf("%d / %d", q.Succeeded, q.Jobs), fmt.Sprintf("%d / %d", h.Succeeded, h.Jobs), "")
	t.Add("coordinator RSS at start MiB", mib(q.RSSStart), mib(h.RSSStart), "")
	t.Add("coordinator RSS, streams open, no event yet MiB", "", mib(h.RSSStreamsOpen), "")
	t.Add("  of it Go heap / goroutine stacks in use MiB", "", mib(h.HeapStreamsOpen)+" / "+mib(h.StackStreamsOpen), "")
	t.Add("coordinator RSS peak MiB (100ms samples)", mib(q.RSSMax), mib(h.RSSMax), "")
	t.Add("coordinator VmHWM at end MiB", mib(q.HWM), mib(h.HWM), "")
	t.Add("coordinator goroutines, most seen", fmt.Sprint(q.Goroutines), fmt.Sprint(h.Goroutines), "")
	t.Add("coordinator threads, most seen", fmt.Sprint(q.Threads), fmt.Sprint(h.Threads), "")
	t.Add("phase window", q.Window.Round(100*time.Millisecond).String(), h.Window.Round(100*time.Millisecond).String(), "")
	t.Print(w)

	a := Table{Title: "The hostile load", Header: []string{"", "count"}}
	a.Add("event-stream attempts", fmt.Sprint(r.Options.Streams))
	a.Add("  admitted (200, held open)", fmt.Sprint(h.StreamsAdmitted))
	a.Add("  refused 429", fmt.Sprint(h.StreamsRefused))
	for _, k := range []string{"api.max_streams_per_token", "api.max_streams", "rate"} {
		a.Add("    naming "+k, fmt.Sprint(h.RefusedBy[k]))
	}
	a.Add("  other answer or error", fmt.Sprint(h.StreamsOther))
	a.Add("  still open at the phase's end", fmt.Sprint(h.StreamsOpenAtEnd))
	a.Add("flood heartbeats sent", fmt.Sprint(h.FloodSent))
	a.Add("  refused (agent_requests_refused_total)", fmt.Sprint(h.FloodRefused))
	a.Add("slow-body connections", fmt.Sprint(r.Options.SlowBodies))
	a.Add("  cut off by the coordinator", fmt.Sprint(h.SlowCut))
	a.Add("  cut off after, p50 / max s", fmt.Sprintf("%.1f / %.1f", h.SlowCutAfter.P50.Seconds(), h.SlowCutAfter.Max.Seconds()))
	a.Add("  still open at the bound", fmt.Sprint(h.SlowOpen))
	a.Add("  failed to connect", fmt.Sprint(h.SlowOther))
	a.Notes = append(a.Notes,
		fmt.Sprintf("%d read tokens; streams alternate /api/v1/events and /ui/events; the flood is %d heartbeats/s of one agent on its own subject, at most %d; slow bodies send 1 byte/s of a 100 KB body, half with a token, at most %s.",
			r.Options.StreamTokens, r.Options.FloodRate, r.Options.FloodMax, r.Options.SlowFor),
		fmt.Sprintf("well-behaved: one protocol-level agent, heartbeat every %s, %d one-step jobs per phase submitted through the API every %s; job completion is from the submit to the agent's result being accepted.",
			r.Options.Heartbeat, r.Options.Jobs, r.Options.JobEvery))
	a.Print(w)
}
