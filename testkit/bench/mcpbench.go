package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/session"
)

// MCPOptions configures the mcp scenario.
type MCPOptions struct {
	Common
	Drivers []string // stores to run on (default sqlite)
	Turns   int      // measured turns of tap + screenshot per path (default 500)
	Warmup  int      // turns per path run first and not measured (default 20)
	// Width and Height of the simulated phone's screen (default 720×1280).
	Width, Height int
}

func (o *MCPOptions) defaults() {
	s := StepOptions{Drivers: o.Drivers, Turns: o.Turns, Warmup: o.Warmup, Width: o.Width, Height: o.Height}
	s.defaults()
	o.Drivers, o.Turns, o.Warmup, o.Width, o.Height = s.Drivers, s.Turns, s.Warmup, s.Width, s.Height
}

// MCPWay is what one way of driving the phone measured: a turn is a tap
// then a screenshot whose PNG the client holds at the end.
type MCPWay struct {
	Turn       Summary // the tap sent → the screenshot's PNG read
	Tap, Shot  Summary // each call on its own
	Phone      Summary // the simulated phone's own time for the turn
	Beyond     Summary // Turn − Phone, turn by turn
	TotalCalls int     // requests measured (tool calls, or HTTP requests)
}

// MCPRow is what one store measured.
type MCPRow struct {
	Driver   string
	Turns    int
	MCP      MCPWay
	HTTP     MCPWay
	PNGBytes int
	Elapsed  time.Duration
}

// OverheadP50 and OverheadP99 are what MCP adds to a turn: the MCP turn's
// percentile minus the HTTP turn's.
func (r MCPRow) OverheadP50() time.Duration { return r.MCP.Turn.P50 - r.HTTP.Turn.P50 }
func (r MCPRow) OverheadP99() time.Duration { return r.MCP.Turn.P99 - r.HTTP.Turn.P99 }

// MCPReport is what the mcp scenario measured.
type MCPReport struct {
	Machine Machine
	Options MCPOptions
	Rows    []MCPRow
}

// MCP measures the tool-call round trip through the coordinator's MCP
// endpoint (docs/mcp.md) beside the same work through the plain sessions
// API, on the step scenario's setup (one coordinator, agent, simulated
// phone and S3 server, shared by both ways, in one session on the phone).
// A turn is a tap then a screenshot: over MCP, the SDK's client calls the
// tap tool then the screenshot tool, whose reply carries the PNG; over
// HTTP, a client posts the tap step, posts the screenshot step and reads
// the PNG through the capture's presigned URL. The two ways alternate turn
// by turn (which goes first alternates too), so both see the same machine.
func MCP(ctx context.Context, o MCPOptions) (*MCPReport, error) {
	o.defaults()
	rep := &MCPReport{Machine: DescribeMachine(), Options: o}
	for _, d := range o.Drivers {
		row, err := mcpRun(ctx, &o, d)
		if err != nil {
			return rep, fmt.Errorf("mcp on %s: %w", d, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// bearerTransport adds the bench token to every request, as an MCP client
// configured with an Authorization header does.
type bearerTransport struct{ next http.RoundTripper }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+benchToken)
	return b.next.RoundTrip(r)
}

func mcpRun(ctx context.Context, o *MCPOptions, driver string) (MCPRow, error) {
	row := MCPRow{Driver: driver}
	e, err := startStepEnv(ctx, &o.Common, "mcp", driver, o.Width, o.Height)
	if err != nil {
		return row, err
	}
	defer e.Close()

	client := sdk.NewClient(&sdk.Implementation{Name: "edgelab-bench", Version: "bench"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.root + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{next: http.DefaultTransport}, Timeout: time.Minute}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return row, fmt.Errorf("connect to %s: %w", api.MCPPath, err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (*sdk.CallToolResult, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", name, err)
		}
		if res.IsError {
			var msg []string
			for _, c := range res.Content {
				if t, ok := c.(*sdk.TextContent); ok {
					msg = append(msg, t.Text)
				}
			}
			return nil, fmt.Errorf("call %s: tool error: %s", name, strings.Join(msg, "; "))
		}
		return res, nil
	}

	// The phone is listed once the agent's first heartbeat is stored.
	var listErr error
	lastList := time.Time{}
	if err := waitFor(ctx, 30*time.Second, func() bool {
		if time.Since(lastList) < 50*time.Millisecond {
			return false
		}
		lastList = time.Now()
		res, err := call(mcp.ToolListPhones, nil)
		if err != nil {
			listErr = err
			return false
		}
		var out mcp.ListPhonesOut
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &out); err != nil {
			listErr = fmt.Errorf("list_phones answered %s", raw)
			return false
		}
		return len(out.Phones) == 1 && out.Phones[0].Free
	}); err != nil {
		return row, fmt.Errorf("phone not listed free: %w (%v)", err, listErr)
	}
	// One session, opened through the endpoint, serves both ways.
	res, err := call(mcp.ToolOpenSession, map[string]any{"project": "bench", "wait_seconds": 30})
	if err != nil {
		return row, err
	}
	var open mcp.OpenOut
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &open); err != nil || open.SessionID == "" {
		return row, fmt.Errorf("open_session answered %s", raw)
	}
	id := open.SessionID
	o.logf("mcp: %s: session %s on %s; %d turns per way after %d warm-up", driver, id, open.Serial, o.Turns, o.Warmup)
	x, y := o.Width/2, o.Height/2

	viaMCP := func() (tap, shot time.Duration, size int, err error) {
		t0 := time.Now()
		if _, err := call(mcp.ToolTap, map[string]any{"session_id": id, "x": x, "y": y}); err != nil {
			return 0, 0, 0, err
		}
		t1 := time.Now()
		res, err := call(mcp.ToolScreenshot, map[string]any{"session_id": id})
		if err != nil {
			return 0, 0, 0, err
		}
		t2 := time.Now()
		for _, c := range res.Content {
			if img, ok := c.(*sdk.ImageContent); ok {
				size = len(img.Data)
			}
		}
		if size == 0 {
			return 0, 0, 0, fmt.Errorf("screenshot tool answered no image")
		}
		return t1.Sub(t0), t2.Sub(t1), size, nil
	}
	steps := e.base + "/" + id + "/steps"
	viaHTTP := func() (tap, shot time.Duration, size int, err error) {
		t0 := time.Now()
		var r session.StepsReply
		if err := e.post(ctx, steps, map[string]any{"steps": []map[string]any{{"op": "tap", "x": x, "y": y}}}, &r); err != nil {
			return 0, 0, 0, err
		}
		if len(r.Steps) != 1 || r.Steps[0].Outcome != "ok" {
			return 0, 0, 0, fmt.Errorf("tap: reply %+v", r.Steps)
		}
		t1 := time.Now()
		r = session.StepsReply{}
		if err := e.post(ctx, steps, map[string]any{"steps": []map[string]any{{"op": "screenshot"}}}, &r); err != nil {
			return 0, 0, 0, err
		}
		if len(r.Steps) != 1 || r.Steps[0].Outcome != "ok" || len(r.Steps[0].Captures) != 1 || r.Steps[0].Captures[0].URL == "" {
			return 0, 0, 0, fmt.Errorf("screenshot: reply %+v", r.Steps)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Steps[0].Captures[0].URL, nil)
		if err != nil {
			return 0, 0, 0, err
		}
		resp, err := e.client.Do(req)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("read capture: %w", err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return 0, 0, 0, fmt.Errorf("read capture: %s %v", resp.Status, err)
		}
		t2 := time.Now()
		return t1.Sub(t0), t2.Sub(t1), len(b), nil
	}

	type acc struct{ turn, tap, shot, phone, beyond Durations }
	var m, h acc
	measure := func(a *acc, way string, f func() (time.Duration, time.Duration, int, error), counted bool, i int) error {
		e.phone.take()
		tap, shot, size, err := f()
		if err != nil {
			return fmt.Errorf("turn %d over %s: %w", i, way, err)
		}
		pt, ps, psize := e.phone.take()
		if size != psize {
			return fmt.Errorf("turn %d over %s: got a %d-byte PNG, the phone made %d bytes", i, way, size, psize)
		}
		if !counted {
			return nil
		}
		row.PNGBytes = size
		a.turn.Add(tap + shot)
		a.tap.Add(tap)
		a.shot.Add(shot)
		a.phone.Add(pt + ps)
		a.beyond.Add(tap + shot - pt - ps)
		return nil
	}
	start := time.Now()
	for i := range o.Warmup + o.Turns {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		counted := i >= o.Warmup
		first, second := func() error { return measure(&h, "http", viaHTTP, counted, i) }, func() error { return measure(&m, "mcp", viaMCP, counted, i) }
		if i%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return row, err
		}
		if err := second(); err != nil {
			return row, err
		}
	}
	row.Elapsed = time.Since(start)
	row.Turns = o.Turns
	sum := func(a *acc, calls int) MCPWay {
		return MCPWay{Turn: a.turn.Summary(), Tap: a.tap.Summary(), Shot: a.shot.Summary(), Phone: a.phone.Summary(), Beyond: a.beyond.Summary(), TotalCalls: calls}
	}
	row.MCP = sum(&m, 2*o.Turns)
	row.HTTP = sum(&h, 3*o.Turns)

	if _, err := call(mcp.ToolCloseSession, map[string]any{"session_id": id}); err != nil {
		return row, err
	}
	return row, nil
}

// PrintMCP writes the mcp scenario's table.
func PrintMCP(w io.Writer, r *MCPReport) {
	t := Table{Title: fmt.Sprintf("Tool-call round trip over MCP beside the sessions API: tap + screenshot %d×%d, same coordinator, agent, phone and session, turns alternating", r.Options.Width, r.Options.Height),
		Header: []string{"store", "way", "turns", "turn p50", "p99", "tap p50", "p99", "screenshot p50", "p99", "phone p50", "beyond phone p50", "p99", "requests"}}
	for _, x := range r.Rows {
		for _, p := range []struct {
			way string
			p   MCPWay
		}{{"http", x.HTTP}, {"mcp", x.MCP}} {
			t.Add(x.Driver, p.way, fmt.Sprint(x.Turns), ms(p.p.Turn.P50), ms(p.p.Turn.P99), ms(p.p.Tap.P50), ms(p.p.Tap.P99),
				ms(p.p.Shot.P50), ms(p.p.Shot.P99), ms(p.p.Phone.P50), ms(p.p.Beyond.P50), ms(p.p.Beyond.P99), fmt.Sprint(p.p.TotalCalls))
		}
		t.Add(x.Driver, "mcp − http", "", ms(x.OverheadP50()), ms(x.OverheadP99()), ms(x.MCP.Tap.P50-x.HTTP.Tap.P50), ms(x.MCP.Tap.P99-x.HTTP.Tap.P99),
			ms(x.MCP.Shot.P50-x.HTTP.Shot.P50), ms(x.MCP.Shot.P99-x.HTTP.Shot.P99), "", "goal p50 ≤ 2", "", "")
	}
	t.Notes = append(t.Notes,
		"milliseconds. mcp: the Go SDK's client (Streamable HTTP) calls the tap tool, then the screenshot tool (full size; the reply carries the PNG as image content). http: POST /api/v1/sessions/{id}/steps with the tap, POST with the screenshot, GET of the capture's presigned URL (the PNG).",
		"turn: the tap sent → the PNG held by the client; phone: the simulated phone's own time for the tap and the screenshot; beyond phone: turn − phone, turn by turn. mcp − http: the MCP endpoint's cost, percentile minus percentile.")
	if len(r.Rows) > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("PNG %d bytes per screenshot; storage: in-process S3 server (testkit/labs3); %d warm-up turns per way not counted.", r.Rows[0].PNGBytes, r.Options.Warmup))
	}
	t.Print(w)
}
