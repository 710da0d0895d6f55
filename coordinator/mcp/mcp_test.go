package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// call calls tool with args and returns its result; a protocol error
// fails the test.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", tool, args, err)
	}
	return res
}

// ok calls tool and fails the test when it answers a tool error.
func ok(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error %q", tool, args, text(res))
	}
	return res
}

// fails calls tool and wants a tool error containing each of want.
func fails(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, want ...string) string {
	t.Helper()
	res := call(t, cs, tool, args)
	msg := text(res)
	if !res.IsError {
		t.Fatalf("%s %v: no tool error, got %q", tool, args, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s %v: error %q does not contain %q", tool, args, msg, w)
		}
	}
	return msg
}

// text joins the text contents of res.
func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes res's structured content into out.
func structured(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode structured content %s: %v", b, err)
	}
}

func phones(t *testing.T, cs *sdk.ClientSession) []mcp.Phone {
	t.Helper()
	var out mcp.ListPhonesOut
	structured(t, ok(t, cs, mcp.ToolListPhones, nil), &out)
	return out.Phones
}

// pngSize decodes the image content of a screenshot.
func pngSize(t *testing.T, res *sdk.CallToolResult) (int, int) {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("screenshot without content")
	}
	img, isImg := res.Content[0].(*sdk.ImageContent)
	if !isImg || img.MIMEType != "image/png" {
		t.Fatalf("screenshot content %T %+v, want an image/png", res.Content[0], res.Content[0])
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("decode screenshot: %v", err)
	}
	return cfg.Width, cfg.Height
}

func elements(t *testing.T, cs *sdk.ClientSession, id string) []mcp.Element {
	t.Helper()
	var out mcp.ElementsOut
	structured(t, ok(t, cs, mcp.ToolListElements, map[string]any{"session_id": id}), &out)
	return out.Elements
}

// TestMCPTools drives the real edgecoord binary's /mcp with the SDK's own
// client: the tools, a session opened on a simulated phone, a screenshot
// decoded as a PNG of the phone's size (and scaled), the elements from the
// UI dump, a tap on an element landing at its centre, text typed, the
// other gestures, close; the job's operation log lists every call. A
// session closes when its MCP client's session ends.
func TestMCPTools(t *testing.T) {
	e := newEnv(t, 3*time.Second, time.Minute)
	pc := e.startAgent("pc-a", capture.SimOptions{Model: "Pixel-Sim", Tags: []string{"project:lab"}, Width: 240, Height: 400})
	cs := e.connect(alice)

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if len(tl.Description) < 30 || tl.InputSchema == nil {
			t.Errorf("tool %s: description %q, input schema %v", tl.Name, tl.Description, tl.InputSchema)
		}
	}
	slices.Sort(names)
	want := []string{mcp.ToolCloseSession, mcp.ToolLaunchApp, mcp.ToolListElements, mcp.ToolListPhones, mcp.ToolLongPress,
		mcp.ToolOpenSession, mcp.ToolPressKey, mcp.ToolRecordObservation, mcp.ToolScreenshot, mcp.ToolSwipe, mcp.ToolTap, mcp.ToolTypeText, mcp.ToolWait}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	ps := phones(t, cs)
	if len(ps) != 1 || ps[0].Serial != "sim-pc-a" || ps[0].Agent != "pc-a" || ps[0].Model != "Pixel-Sim" || ps[0].State != protocol.DeviceReady || !ps[0].Free {
		t.Fatalf("list_phones %+v, want sim-pc-a free", ps)
	}

	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, map[string]any{"model": "Pixel-Sim"}), &open)
	if open.SessionID == "" || open.Serial != "sim-pc-a" || open.Project != "lab" || open.IdleTimeout != "1m0s" {
		t.Fatalf("open_session %+v", open)
	}
	id := map[string]any{"session_id": open.SessionID}
	if ps := phones(t, cs); len(ps) != 1 || ps[0].Free {
		t.Fatalf("list_phones with the session open %+v, want sim-pc-a busy", ps)
	}

	shot := ok(t, cs, mcp.ToolScreenshot, id)
	if w, h := pngSize(t, shot); w != 240 || h != 400 {
		t.Fatalf("screenshot %dx%d, want 240x400", w, h)
	}
	if msg := text(shot); !strings.Contains(msg, "step 1: screenshot 240x400, stored as artifact screenshot-001.png") {
		t.Fatalf("screenshot text %q", msg)
	}
	shot = ok(t, cs, mcp.ToolScreenshot, map[string]any{"session_id": open.SessionID, "max_width": 120})
	if w, h := pngSize(t, shot); w != 120 || h != 200 {
		t.Fatalf("scaled screenshot %dx%d, want 120x200", w, h)
	}

	// Tap the launcher's Shop icon by its index: the phone gets the tap
	// at the element's centre, and the app opens.
	els := elements(t, cs, open.SessionID)
	shop := slices.IndexFunc(els, func(el mcp.Element) bool { return el.Text == "Shop" })
	if shop < 0 || !els[shop].Clickable || els[shop].Index != shop {
		t.Fatalf("no clickable Shop element in %+v", els)
	}
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": shop})
	b := els[shop].Bounds
	cx, cy := (b[0]+b[2])/2, (b[1]+b[3])/2
	hist := pc.Phone.History()
	if last := hist[len(hist)-1]; last.Op != protocol.OpTap || last.X != cx || last.Y != cy {
		t.Fatalf("phone's last operation %+v, want a tap at the element's centre %d,%d", last, cx, cy)
	}
	if pc.Phone.Foreground() != "com.example.shop" {
		t.Fatalf("foreground %q after tapping Shop", pc.Phone.Foreground())
	}

	// Type into the app's field.
	els = elements(t, cs, open.SessionID)
	field := slices.IndexFunc(els, func(el mcp.Element) bool { return strings.HasSuffix(el.ResourceID, ":id/input") })
	if field < 0 {
		t.Fatalf("no input field in %+v", els)
	}
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": field})
	ok(t, cs, mcp.ToolTypeText, map[string]any{"session_id": open.SessionID, "text": "hello"})
	if got := pc.Phone.Typed(); got != "hello" {
		t.Fatalf("typed %q, want hello", got)
	}
	ok(t, cs, mcp.ToolPressKey, map[string]any{"session_id": open.SessionID, "key": "back"})
	ok(t, cs, mcp.ToolLaunchApp, map[string]any{"session_id": open.SessionID, "package": "com.android.settings"})
	ok(t, cs, mcp.ToolWait, map[string]any{"session_id": open.SessionID, "duration_ms": 20})
	ok(t, cs, mcp.ToolSwipe, map[string]any{"session_id": open.SessionID, "x1": 100, "y1": 300, "x2": 100, "y2": 100, "duration_ms": 50})
	ok(t, cs, mcp.ToolLongPress, map[string]any{"session_id": open.SessionID, "x": 30, "y": 40, "duration_ms": 60})

	// Bad arguments are tool errors that reach no phone.
	before := len(pc.Phone.History())
	fails(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": 999}, "element: 999 is not an index")
	fails(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "x": 3}, "give element")
	fails(t, cs, mcp.ToolTypeText, map[string]any{"session_id": open.SessionID, "text": "a\tb"}, "text: character 2 (U+0009) is not printable")
	fails(t, cs, mcp.ToolWait, map[string]any{"session_id": open.SessionID, "duration_ms": 0}, "duration_ms: 0 is out of range")
	fails(t, cs, mcp.ToolScreenshot, map[string]any{"session_id": "nope"}, "no such session")
	if n := len(pc.Phone.History()); n != before {
		t.Fatalf("bad arguments reached the phone: %d operations, want %d", n, before)
	}

	closed := text(ok(t, cs, mcp.ToolCloseSession, id))
	if !strings.Contains(closed, "closed after 12 steps") || !strings.Contains(closed, "oplog.jsonl") {
		t.Fatalf("close_session %q", closed)
	}
	fails(t, cs, mcp.ToolScreenshot, id, "is closed")
	job, err := e.store.Get(e.ctx, open.JobID)
	if err != nil || job.Status != jobstore.StatusSucceeded || job.SubmittedBy != alice || job.Project != "lab" {
		t.Fatalf("job %+v, %v; want SUCCEEDED, submitted by alice in lab", job, err)
	}
	if ps := phones(t, cs); len(ps) != 1 || !ps[0].Free {
		t.Fatalf("list_phones after close %+v, want sim-pc-a free", ps)
	}

	// A client that goes away releases the phone of the session it opened.
	cs2 := e.connect(alice)
	var open2 mcp.OpenOut
	structured(t, ok(t, cs2, mcp.ToolOpenSession, nil), &open2)
	ok(t, cs2, mcp.ToolScreenshot, map[string]any{"session_id": open2.SessionID})
	if err := cs2.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the session closed with its client", func() bool {
		j, err := e.store.Get(e.ctx, open2.JobID)
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	if ps := phones(t, cs); len(ps) != 1 || !ps[0].Free {
		t.Fatalf("list_phones after the client left %+v, want sim-pc-a free", ps)
	}

	// The job's operation log lists every call, in order.
	var ops []string
	sc := bufio.NewScanner(bytes.NewReader(e.get("jobs/" + open.JobID + "/g1/oplog.jsonl")))
	for sc.Scan() {
		var entry capture.OpEntry
		if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
			t.Fatalf("oplog line %q: %v", sc.Text(), err)
		}
		if entry.Outcome != protocol.OutcomeOK {
			t.Errorf("oplog entry %+v not ok", entry)
		}
		ops = append(ops, entry.Op)
	}
	wantOps := []string{"screenshot", "screenshot", "ui_dump", "tap", "ui_dump", "tap", "text", "key", "launch", "wait", "swipe", "swipe"}
	if !slices.Equal(ops, wantOps) {
		t.Fatalf("operation log %v, want %v", ops, wantOps)
	}
}

// TestMCPAccess: with projects.lab.phones selecting agent pc-a, a token
// without operate lists phones but cannot act; a token of another project
// sees only the phone no project selects, cannot open a session on lab's
// phone (told why) and cannot touch a session of lab; lab's tokens do not
// see the other phone; a second client finds lab's only phone busy; a
// session closes after the idle timeout.
func TestMCPAccess(t *testing.T) {
	e := newEnv(t, 3*time.Second, 2*time.Second, "projects:\n  lab:\n    phones:\n      - agent: pc-a\n")
	pc := e.startAgent("pc-a", capture.SimOptions{})
	untagged := e.startAgent("pc-b", capture.SimOptions{})
	// Without a valid token the endpoint answers 401, before MCP.
	bad := sdk.NewClient(&sdk.Implementation{Name: "mcp-test", Version: "1"}, nil)
	if _, err := bad.Connect(e.ctx, &sdk.StreamableClientTransport{Endpoint: e.base + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token: "edg_wrong", next: http.DefaultTransport}}}, nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("connect with an unknown token: %v, want 401 Unauthorized", err)
	}
	a1, a2 := e.connect(alice), e.connect(alice)
	r, o := e.connect(rita), e.connect(oscar)

	if ps := phones(t, a1); len(ps) != 1 || ps[0].Serial != "sim-pc-a" {
		t.Fatalf("alice lists %+v, want sim-pc-a alone", ps)
	}
	if ps := phones(t, r); len(ps) != 1 || ps[0].Serial != "sim-pc-a" {
		t.Fatalf("rita lists %+v, want sim-pc-a", ps)
	}
	if ps := phones(t, o); len(ps) != 1 || ps[0].Serial != "sim-pc-b" {
		t.Fatalf("oscar (project other) lists %+v, want sim-pc-b alone", ps)
	}
	fails(t, r, mcp.ToolOpenSession, nil, "token rita lacks the operate scope")
	fails(t, o, mcp.ToolOpenSession, map[string]any{"serial": "sim-pc-a", "wait_seconds": 1}, "may be used by project other", "reserved for project lab")
	fails(t, o, mcp.ToolOpenSession, map[string]any{"project": "lab"}, `project: "lab" is not among the token's projects`)

	var open mcp.OpenOut
	structured(t, ok(t, a1, mcp.ToolOpenSession, nil), &open)
	if open.Serial != "sim-pc-a" {
		t.Fatalf("alice opened %+v, want sim-pc-a", open)
	}
	id := map[string]any{"session_id": open.SessionID}
	fails(t, r, mcp.ToolScreenshot, id, "token rita lacks the operate scope")
	fails(t, r, mcp.ToolCloseSession, id, "token rita lacks the operate scope")
	// The refusal does not name the session's project.
	for _, msg := range []string{
		fails(t, o, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "x": 1, "y": 1}, "belongs to a project not among the token's projects"),
		fails(t, o, mcp.ToolCloseSession, id, "belongs to a project not among the token's projects"),
	} {
		if strings.Contains(msg, "lab") {
			t.Errorf("the refusal names the session's project: %q", msg)
		}
	}
	// Those attempts are recorded like the API's 403s.
	ds, err := e.store.APIDenials(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Counted per token, kind and minute; a row keeps the last call.
	var n int64
	for _, d := range ds {
		if d.TokenName != oscar || d.Route != "/mcp" || d.JobID != open.JobID || d.Project != "lab" || !strings.HasPrefix(d.Method, "MCP ") {
			t.Fatalf("recorded denials %+v", ds)
		}
		n += d.Count
	}
	if n != 2 || ds[len(ds)-1].Method != "MCP close_session" {
		t.Fatalf("recorded denials %+v", ds)
	}
	// The only phone of lab is taken: a second client is told so.
	fails(t, a2, mcp.ToolOpenSession, map[string]any{"wait_seconds": 1}, "no phone for the session")
	if ops := pc.Ops(); len(ops) != 0 {
		t.Fatalf("refused calls reached the phone: %v", ops)
	}
	if ops := untagged.Ops(); len(ops) != 0 {
		t.Fatalf("the phone lab may not use ran %v", ops)
	}

	ok(t, a1, mcp.ToolCloseSession, id)
	var second mcp.OpenOut
	structured(t, ok(t, a2, mcp.ToolOpenSession, map[string]any{"wait_seconds": 10}), &second)
	ok(t, a2, mcp.ToolWait, map[string]any{"session_id": second.SessionID, "duration_ms": 1})
	// No call for the idle timeout (2s): the session closes itself and the
	// phone is free again.
	testenv.Eventually(t, 20*time.Second, "the idle session closed", func() bool {
		j, err := e.store.Get(e.ctx, second.JobID)
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	fails(t, a2, mcp.ToolScreenshot, map[string]any{"session_id": second.SessionID}, "is closed")
	if ps := phones(t, a2); len(ps) != 1 || !ps[0].Free {
		t.Fatalf("after the idle close %+v, want sim-pc-a free", ps)
	}
}

// TestMCPSessionLost: the agent holding an MCP session's phone is killed
// and the job taken over by another agent's phone; the client's next call
// is a tool error naming the generation and the last step, and nothing it
// sends afterwards reaches either phone.
func TestMCPSessionLost(t *testing.T) {
	e := newEnv(t, 1500*time.Millisecond, time.Minute)
	agents := map[string]*e2e.SimAgent{
		"pc-a": e.startAgent("pc-a", capture.SimOptions{Tags: []string{"project:lab"}}),
		"pc-b": e.startAgent("pc-b", capture.SimOptions{Tags: []string{"project:lab"}}),
	}
	cs := e.connect(alice)
	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, nil), &open)
	held, other := agents[open.Agent], agents["pc-a"]
	if open.Agent == "pc-a" {
		other = agents["pc-b"]
	}
	id := map[string]any{"session_id": open.SessionID}
	ok(t, cs, mcp.ToolScreenshot, id)
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "x": 5, "y": 6})

	held.Kill()
	testenv.Eventually(t, 20*time.Second, "the job taken over by "+other.ID, func() bool {
		j, err := e.store.Get(e.ctx, open.JobID)
		return err == nil && j.Generation >= 2 && strings.HasPrefix(j.WorkerID, other.ID+"/")
	})
	fails(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "x": 9, "y": 10}, "lost at generation 1 after step 2", "nothing more runs on it")
	fails(t, cs, mcp.ToolScreenshot, id, "lost at generation 1 after step 2")
	fails(t, cs, mcp.ToolCloseSession, id, "lost at generation 1 after step 2")
	testenv.Eventually(t, 10*time.Second, other.ID+" released the job", func() bool {
		j, err := e.store.Get(e.ctx, open.JobID)
		return err == nil && jobstore.Finished(j.Status) && len(other.Agent.Jobs()) == 0
	})
	if ops := held.Ops(); ops[protocol.OpScreenshot] != 1 || ops[protocol.OpTap] != 1 || len(ops) != 2 {
		t.Fatalf("killed agent's phone ran %v, want 1 screenshot and 1 tap", ops)
	}
	if ops := other.Ops(); len(ops) != 0 {
		t.Fatalf("the phone the job moved to ran %v, want nothing", ops)
	}
}

// TestMCPFakeADBPhone: the same tools on the fake adb phone behind a real
// adb server: the screenshot is a PNG of the phone's size, and the tap on
// an element and the typed text reach the phone as adb input commands,
// the tap at the element's centre.
func TestMCPFakeADBPhone(t *testing.T) {
	e := newEnv(t, 3*time.Second, time.Minute)
	srv := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 7", Width: 360, Height: 640})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Close() })
	srv.Connect(t, phone.Addr(), protocol.DeviceReady)
	inv, stop, err := capture.NewADBInventory(context.Background(), capture.ADBOptions{Address: srv.Addr, ADBPath: srv.Path,
		Tags: map[string][]string{phone.Serial(): {"project:lab"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	testenv.Eventually(t, 20*time.Second, "the phone ready in the inventory", func() bool {
		ds := inv.Devices()
		return len(ds) == 1 && ds[0].State == protocol.DeviceReady
	})
	e.servers.StartSimAgent(e2e.SimAgentOptions{ID: "pc-adb", Phones: agent.InventoryPhones(inv, t.TempDir(), capture.OpLogOptions{})})
	cs := e.connect(alice)

	testenv.Eventually(t, 10*time.Second, "the phone listed", func() bool {
		ps := phones(t, cs)
		return len(ps) == 1 && ps[0].Serial == phone.Serial() && ps[0].Model == "Pixel 7" && ps[0].Free
	})
	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, map[string]any{"serial": phone.Serial()}), &open)
	id := map[string]any{"session_id": open.SessionID}
	if w, h := pngSize(t, ok(t, cs, mcp.ToolScreenshot, id)); w != 360 || h != 640 {
		t.Fatalf("screenshot %dx%d, want 360x640", w, h)
	}
	els := elements(t, cs, open.SessionID)
	shop := slices.IndexFunc(els, func(el mcp.Element) bool { return el.Text == "Shop" })
	if shop < 0 {
		t.Fatalf("no Shop element in %+v", els)
	}
	sb := els[shop].Bounds
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": shop})
	els = elements(t, cs, open.SessionID)
	field := slices.IndexFunc(els, func(el mcp.Element) bool { return strings.HasSuffix(el.ResourceID, ":id/input") })
	if field < 0 {
		t.Fatalf("no input field after tapping Shop: %+v", els)
	}
	ok(t, cs, mcp.ToolTypeText, map[string]any{"session_id": open.SessionID, "text": "hi"})
	var got []string
	for _, in := range phone.Inputs() {
		got = append(got, in.String())
	}
	want := []string{fmt.Sprintf("tap %d %d", (sb[0]+sb[2])/2, (sb[1]+sb[3])/2), "text hi"}
	if !slices.Equal(got, want) {
		t.Fatalf("adb input commands %q, want %q", got, want)
	}
	closed := text(ok(t, cs, mcp.ToolCloseSession, id))
	if !strings.Contains(closed, "closed after 5 steps") {
		t.Fatalf("close_session %q", closed)
	}
}
