package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/testkit/labs3"
)

// StepOptions configures the interactive step scenario.
type StepOptions struct {
	Common
	Drivers []string // stores to run on (default sqlite)
	Turns   int      // measured turns of tap + screenshot (default 500)
	Warmup  int      // turns run first and not measured (default 20)
	// Width and Height of the simulated phone's screen (default 720×1280).
	Width, Height int
}

func (o *StepOptions) defaults() {
	if len(o.Drivers) == 0 {
		o.Drivers = []string{DriverSQLite}
	}
	if o.Turns <= 0 {
		o.Turns = 500
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	} else if o.Warmup == 0 {
		o.Warmup = 20
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 720, 1280
	}
}

// StepRow is what one store measured.
type StepRow struct {
	Driver string
	Turns  int
	// RoundTrip: the HTTP request with the two steps sent → its reply read.
	RoundTrip Summary
	// Phone: the simulated phone's own time for the turn's tap and
	// screenshot (the PNG rendered and encoded); Capture: the screenshot
	// alone.
	Phone   Summary
	Capture Summary
	// Agent: the two steps' duration_ms as the agent reported them (the
	// phone, the upload to storage and the artifact's registration).
	Agent Summary
	// Overhead: RoundTrip − Phone, turn by turn; Path: RoundTrip − Agent,
	// what HTTP, the session manager, its store checks and NATS add.
	Overhead Summary
	Path     Summary
	PNGBytes int
	Elapsed  time.Duration
}

// StepReport is what the step scenario measured.
type StepReport struct {
	Machine Machine
	Options StepOptions
	Rows    []StepRow
}

// timedPhone is a simulated phone that times its own taps and screenshots.
type timedPhone struct {
	*capture.Simulated
	mu        sync.Mutex
	tap, shot time.Duration
	size      int
}

func (p *timedPhone) Screenshot(ctx context.Context) ([]byte, error) {
	start := time.Now()
	b, err := p.Simulated.Screenshot(ctx)
	d := time.Since(start)
	p.mu.Lock()
	p.shot += d
	p.size = len(b)
	p.mu.Unlock()
	return b, err
}

func (p *timedPhone) Tap(ctx context.Context, x, y int) error {
	start := time.Now()
	err := p.Simulated.Tap(ctx, x, y)
	d := time.Since(start)
	p.mu.Lock()
	p.tap += d
	p.mu.Unlock()
	return err
}

// take returns and resets the time spent since the last take.
func (p *timedPhone) take() (tap, shot time.Duration, size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tap, shot, size = p.tap, p.shot, p.size
	p.tap, p.shot = 0, 0
	return tap, shot, size
}

// Step measures the interactive step round trip: a client posts one
// session step call (tap, then a screenshot) over HTTP to the sessions API
// of a coordinator, which sends each step over NATS to a real agent; the
// agent runs it on a simulated phone, uploads the capture to S3 (an
// in-process S3 server) and registers it, and the reply carries the
// capture's presigned URL. Turns run one after another, as an AI loop
// drives them.
func Step(ctx context.Context, o StepOptions) (*StepReport, error) {
	o.defaults()
	rep := &StepReport{Machine: DescribeMachine(), Options: o}
	for _, d := range o.Drivers {
		row, err := stepRun(ctx, &o, d)
		if err != nil {
			return rep, fmt.Errorf("step on %s: %w", d, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// stepEnv is the setup the step and mcp scenarios share: a coordinator
// on the store, a real agent with one timed simulated phone, an in-process
// S3 server, and on loopback an HTTP server with the sessions API and the
// MCP endpoint, both behind one bearer token of project bench.
type stepEnv struct {
	phone  *timedPhone
	root   string // http://host:port
	base   string // root + session.PathPrefix
	client *http.Client
	close  []func()
}

// benchToken is the bearer token of the step and mcp scenarios' server.
const benchToken = "bench-token"

func (e *stepEnv) Close() {
	for i := len(e.close) - 1; i >= 0; i-- {
		e.close[i]()
	}
}

// post sends body as JSON to url and decodes the reply into out.
func (e *stepEnv) post(ctx context.Context, url string, body any, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}

// closeSession closes session id through the sessions API.
func (e *stepEnv) closeSession(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, e.base+"/"+id, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("close session: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("close session: " + resp.Status)
	}
	return nil
}

// startStepEnv starts the shared setup on store driver; name names the
// run's directory.
func startStepEnv(ctx context.Context, c *Common, name, driver string, width, height int) (_ *stepEnv, err error) {
	e := &stepEnv{}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	cc := CoordConfig{LeaseTTL: 30 * time.Second, ReapInterval: time.Second, ScheduleInterval: 500 * time.Millisecond,
		HeartbeatEvery: 5 * time.Second, OfflineAfter: 15 * time.Second, LogLevel: zerolog.InfoLevel}
	sys, err := startSystem(ctx, c, name, driver, cc, coordInProcess)
	if err != nil {
		return nil, err
	}
	e.close = append(e.close, sys.Close)
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	e.close = append(e.close, func() { s3.Close() })

	// The agent: the real one, on one timed simulated phone (with no
	// projects.<name>.phones every project may use it: docs/mcp.md).
	e.phone = &timedPhone{Simulated: capture.NewSimulated(capture.SimOptions{Serial: "sim-step", Width: width, Height: height})}
	inv := capture.NewInventory()
	if err := inv.Add(e.phone); err != nil {
		return nil, err
	}
	cfg := config.DefaultAgent()
	cfg.Sleep.Inhibit = false // an in-process agent never holds the PC awake
	cfg.AgentID = "step-agent"
	cfg.StateDir = filepath.Join(sys.dir, "agent-state")
	cfg.NATS.URL = sys.NATS.ClientURL()
	cfg.Storage.S3 = config.S3{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, AccessKey: s3.AccessKey, SecretKey: config.Secret(s3.SecretKey)}
	cfg.Status.Listen = ""
	d, err := agent.NewDaemon(ctx, cfg, agent.System{Phones: inv, Log: zerolog.Nop(), Version: "bench"})
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	e.close = append(e.close, func() { d.Close() })
	actx, stopAgent := context.WithCancel(ctx)
	var agentDone sync.WaitGroup
	agentDone.Go(func() { _ = d.Run(actx, actx.Done()) })
	e.close = append(e.close, func() { stopAgent(); agentDone.Wait() })
	if err := waitFor(ctx, 10*time.Second, d.Agent().Ready); err != nil {
		return nil, fmt.Errorf("agent not connected: %w", err)
	}

	// The sessions API and the MCP endpoint of the coordinator, on
	// loopback, with the same authentication.
	nc, err := nats.Connect(sys.NATS.ClientURL(), nats.Name("bench sessions"), nats.CustomInboxPrefix(coordinator.InboxPrefix))
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	e.close = append(e.close, nc.Close)
	pre, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		return nil, err
	}
	mgr, err := session.New(session.Options{Store: sys.Store, Conn: nc, Presigner: pre, Kick: sys.Kick, Log: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	authorized := func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+benchToken }
	sh := session.NewHandler(mgr, func(r *http.Request) (session.Caller, bool) {
		if !authorized(r) {
			return session.Caller{}, false
		}
		return session.Caller{Name: "bench", Projects: []string{"bench"}, CanOperate: true}, true
	})
	mcpSrv, err := mcp.New(mcp.Options{Sessions: mgr, Store: sys.Store, OfflineAfter: cc.OfflineAfter, IdleTimeout: 10 * time.Minute, Version: "bench", Log: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	caller := api.Caller{TokenID: 1, Name: "bench", Projects: []string{"bench"}, Scopes: []string{jobstore.ScopeRead, jobstore.ScopeOperate}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.MCPPath {
			sh.ServeHTTP(w, r)
			return
		}
		if !authorized(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpSrv.ServeHTTP(w, r.WithContext(api.WithCaller(r.Context(), caller)))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.close = append(e.close, func() { srv.Close() })
	e.root = "http://" + ln.Addr().String()
	e.base = e.root + session.PathPrefix
	e.client = &http.Client{Timeout: time.Minute}
	return e, nil
}

func stepRun(ctx context.Context, o *StepOptions, driver string) (StepRow, error) {
	row := StepRow{Driver: driver}
	e, err := startStepEnv(ctx, &o.Common, "step", driver, o.Width, o.Height)
	if err != nil {
		return row, err
	}
	defer e.Close()
	base, phone := e.base, e.phone
	post := func(url string, body any, out any) error { return e.post(ctx, url, body, out) }

	var doc session.Doc
	if err := post(base, map[string]any{"project": "bench", "idle_timeout": "10m"}, &doc); err != nil {
		return row, fmt.Errorf("open session: %w", err)
	}
	o.logf("step: %s: session %s on %s; %d turns after %d warm-up", driver, doc.ID, doc.Phone.Serial, o.Turns, o.Warmup)
	turn := map[string]any{"steps": []map[string]any{{"op": "tap", "x": o.Width / 2, "y": o.Height / 2}, {"op": "screenshot"}}}
	var rt, ph, shots, ag, over, path Durations
	start := time.Now()
	for i := range o.Warmup + o.Turns {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		phone.take()
		var res session.StepsReply
		t0 := time.Now()
		if err := post(base+"/"+doc.ID+"/steps", turn, &res); err != nil {
			return row, fmt.Errorf("turn %d: %w", i, err)
		}
		took := time.Since(t0)
		tap, shot, size := phone.take()
		if len(res.Steps) != 2 || res.Steps[1].Outcome != "ok" || len(res.Steps[1].Captures) != 1 || res.Steps[1].Captures[0].URL == "" {
			return row, fmt.Errorf("turn %d: reply %+v", i, res.Steps)
		}
		if i < o.Warmup {
			continue
		}
		row.PNGBytes = size
		rt.Add(took)
		ph.Add(tap + shot)
		shots.Add(shot)
		agent := time.Duration((res.Steps[0].DurationMS + res.Steps[1].DurationMS) * float64(time.Millisecond))
		ag.Add(agent)
		over.Add(took - tap - shot)
		path.Add(took - agent)
	}
	row.Elapsed = time.Since(start)
	row.Turns = o.Turns
	row.RoundTrip, row.Phone, row.Capture, row.Agent, row.Overhead, row.Path = rt.Summary(), ph.Summary(), shots.Summary(), ag.Summary(), over.Summary(), path.Summary()

	if err := e.closeSession(ctx, doc.ID); err != nil {
		return row, err
	}
	return row, nil
}

// PrintStep writes the step scenario's table.
func PrintStep(w io.Writer, r *StepReport) {
	t := Table{Title: fmt.Sprintf("Interactive step round trip: tap + screenshot %d×%d, one HTTP call per turn, turns one after another", r.Options.Width, r.Options.Height),
		Header: []string{"store", "turns", "round trip p50", "p99", "phone p50", "p99", "screenshot p50", "p99", "agent p50", "p99", "overhead p50", "p99", "goal p50/p99", "beyond agent p50", "p99"}}
	for _, x := range r.Rows {
		t.Add(x.Driver, fmt.Sprint(x.Turns), ms(x.RoundTrip.P50), ms(x.RoundTrip.P99), ms(x.Phone.P50), ms(x.Phone.P99),
			ms(x.Capture.P50), ms(x.Capture.P99), ms(x.Agent.P50), ms(x.Agent.P99), ms(x.Overhead.P50), ms(x.Overhead.P99), "≤ 15 / ≤ 50", ms(x.Path.P50), ms(x.Path.P99))
	}
	t.Notes = append(t.Notes,
		"milliseconds. round trip: POST /api/v1/sessions/{id}/steps sent → reply read (HTTP → coordinator → NATS → agent → phone → S3 upload and registration, per step → reply with presigned URLs).",
		"phone: the simulated phone's own time for the tap and the screenshot (PNG rendered and encoded); agent: the steps' duration_ms as the agent reports them (phone, upload, registration); overhead: round trip − phone, turn by turn; beyond agent: round trip − agent (HTTP, session manager and its store checks, NATS).")
	if len(r.Rows) > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("PNG %d bytes per screenshot; storage: in-process S3 server (testkit/labs3); %d warm-up turns not counted.", r.Rows[0].PNGBytes, r.Options.Warmup))
	}
	t.Print(w)
}
