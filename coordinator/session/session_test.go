package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// aiLoop runs examples/python/ai_loop.py with args and returns its exit
// code, standard output and standard error.
func aiLoop(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 not found: %v", err)
		}
		t.Skip("python3 not found")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "python", "ai_loop.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run ai_loop.py: %v", err)
	}
	shown := slices.Clone(args)
	for i := range shown {
		if i > 0 && shown[i-1] == "--token" {
			shown[i] = "TOKEN" // no token in the test's log
		}
	}
	t.Logf("ai_loop.py %s: exit %d\n%s%s", strings.Join(shown, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// TestAILoopExample: examples/python/ai_loop.py opens a session over the
// API of the real edgecoord binary with a token made by `edgecoord token
// create`, takes a screenshot, taps where it decided, takes another and
// closes the session; every step ran once on the phone, the captures are
// PNGs behind their presigned URLs with the job's stamps, and the job
// succeeded. Errors come back as the API's problem detail with a non-zero
// exit; another project's session is refused and recorded.
func TestAILoopExample(t *testing.T) {
	e := newBinaryEnv(t, 3*time.Second)
	pc := e.startAgent("pc-a", capture.SimOptions{Model: "Pixel-Sim", Width: 240, Height: 400})

	code, out, _ := aiLoop(t, "--api", e.api.URL, "--token", e.token(tokenOperator), "--project", "lab", "--serial", "sim-pc-a")
	if code != 0 {
		t.Fatalf("ai_loop.py exit %d", code)
	}
	for _, want := range []string{
		"on pc-a phone sim-pc-a (Pixel-Sim)",
		"step 1 screenshot: ok", "capture before.png (image/png): http",
		"screen 240x400: tapping at 120,200",
		"step 2 tap: ok", "step 3 screenshot: ok", "capture after.png (image/png): http",
		": closed after 3 steps", "artifact oplog.jsonl (application/x-ndjson): http",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if got := pc.Ops(); got[protocol.OpScreenshot] != 2 || got[protocol.OpTap] != 1 || len(got) != 2 {
		t.Fatalf("phone operations %v, want 2 screenshots and 1 tap", got)
	}
	for _, c := range pc.Phone.History() {
		if c.Op == protocol.OpTap && (c.X != 120 || c.Y != 200) {
			t.Fatalf("tap at %d,%d, want 120,200", c.X, c.Y)
		}
	}
	m := regexp.MustCompile(`^session (\S+): job (\S+) on`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no session line in %q", out)
	}
	job, err := e.store.Get(e.ctx, m[2])
	if err != nil || job.Status != jobstore.StatusSucceeded || !job.Task.Interactive || job.Project != "lab" || job.SubmittedBy != "alice" {
		t.Fatalf("job %+v, %v; want SUCCEEDED, interactive, project lab, submitted by alice", job, err)
	}
	// The capture URL the script printed serves the PNG with its stamps.
	u := regexp.MustCompile(`capture after\.png \(image/png\): (\S+)`).FindStringSubmatch(out)
	resp, err := http.Get(u[1])
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("GET capture: %d, %d bytes", resp.StatusCode, len(png))
	}
	obj, err := e.s3.Stat(e.ctx, "jobs/"+job.ID+"/g1/after.png")
	if want := (fencing.Token{JobID: job.ID, Owner: job.CompletedBy, Generation: 1}); err != nil || obj.Token != want {
		t.Fatalf("after.png stamps %+v (%v), want %v", obj.Token, err, want)
	}

	// Errors: the problem's detail, exit 1.
	code, _, stderr := aiLoop(t, "--api", e.api.URL, "--token", "wrong")
	if code != 1 || !strings.Contains(stderr, "HTTP 401: unknown token") {
		t.Fatalf("bad token: exit %d, %q", code, stderr)
	}
	// --api takes the base URL with /api/v1 as well.
	code, _, stderr = aiLoop(t, "--api", e.api.URL+"/api/v1", "--token", e.token(tokenReadOnly))
	if code != 1 || !strings.Contains(stderr, "HTTP 403: token rita lacks scope operate") {
		t.Fatalf("read-only token: exit %d, %q", code, stderr)
	}
	code, _, stderr = aiLoop(t, "--api", e.api.URL+"/api/v1/", "--token", e.token(tokenOperator), "--serial", "no-such-phone")
	if code != 1 || !strings.Contains(stderr, "HTTP 503: no phone for the session: no connected phone matches") {
		t.Fatalf("unknown phone: exit %d, %q", code, stderr)
	}
	code, _, stderr = aiLoop(t, "--api", e.api.URL, "--token", e.token(tokenOperator), "--project", "other")
	if code != 1 || !strings.Contains(stderr, `HTTP 403: project "other" is not among the token's projects`) {
		t.Fatalf("other project: exit %d, %q", code, stderr)
	}
	// Another project's session, asked for by id, is refused and recorded
	// with its job, like the API's other 403s.
	code, body := e.call("GET", "/api/v1/sessions/"+m[1], tokenOther, nil, nil)
	e.wantProblem("another project's session", 403, body, code, "urn:edgeagent:problem:forbidden")
	ds, err := e.store.APIDenials(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].TokenName != "alice" || ds[0].Project != "other" || ds[0].Method != "POST" || ds[0].Route != "/api/v1/sessions" ||
		ds[1].TokenName != "oscar" || ds[1].Project != "lab" || ds[1].JobID != job.ID || ds[1].Route != "/api/v1/sessions/"+m[1] {
		t.Fatalf("recorded denials %+v", ds)
	}
	if got := pc.Ops(); got[protocol.OpScreenshot] != 2 || got[protocol.OpTap] != 1 {
		t.Fatalf("after the refused runs, phone operations %v", got)
	}
}

// stepsReply is the reply to a step call.
type stepsReply struct {
	Steps []session.StepResult `json:"steps"`
}

// TestSessionLostWhenAgentKilled: with the real edgecoord binary, the
// agent holding a session's phone is killed mid-session and the job is taken over by another agent's phone.
// The next step call answers 409 lost, naming the generation the session
// held and its last step; no step runs twice, on either phone, and the
// phone the job moved to is released.
func TestSessionLostWhenAgentKilled(t *testing.T) {
	e := newBinaryEnv(t, 1500*time.Millisecond)
	agents := map[string]*e2e.SimAgent{"pc-a": e.startAgent("pc-a", capture.SimOptions{}), "pc-b": e.startAgent("pc-b", capture.SimOptions{})}

	var doc session.Doc
	if code, body := e.call("POST", "/api/v1/sessions", tokenOperator, map[string]any{"device": map[string]any{}, "idle_timeout": "1m"}, &doc); code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	held, other := agents[doc.Agent], agents["pc-a"]
	if doc.Agent == "pc-a" {
		other = agents["pc-b"]
	}
	if held == nil || doc.Status != session.StatusOpen || doc.Phone.Serial != "sim-"+doc.Agent {
		t.Fatalf("opened %+v", doc)
	}
	steps := "/api/v1/sessions/" + doc.ID + "/steps"
	var rep stepsReply
	if code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "screenshot"}, {"op": "tap", "x": 5, "y": 6}]}`, &rep); code != 200 || len(rep.Steps) != 2 || rep.Steps[1].Seq != 2 {
		t.Fatalf("steps: %d %s", code, body)
	}

	held.Kill()
	// Until the lease moves, the session is not lost: its agent is just
	// not there, and the step does not run.
	code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "tap", "x": 7, "y": 8}]}`, nil)
	switch code {
	case 503:
		e.wantProblem("step to a killed agent", 503, body, code, "is not connected: the step did not run")
	case 409: // the lease already moved
	default:
		t.Fatalf("step to a killed agent: %d %s", code, body)
	}
	testenv.Eventually(t, 20*time.Second, "the job taken over by "+other.ID, func() bool {
		j, err := e.store.Get(e.ctx, doc.JobID)
		return err == nil && j.Generation >= 2 && strings.HasPrefix(j.WorkerID, other.ID+"/")
	})

	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "tap", "x": 9, "y": 10}, {"op": "screenshot"}]}`, nil)
	p := e.wantProblem("step after the takeover", 409, body, code, "lost at generation 1 after step 2")
	if p.Generation == nil || *p.Generation != 1 || p.LastStep == nil || *p.LastStep != 2 || p.JobID != doc.JobID || len(p.Steps) != 0 {
		t.Fatalf("lost problem %s: want generation 1, last_step 2, job %s, no steps", body, doc.JobID)
	}
	// It stays lost, whatever is asked.
	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "screenshot"}]}`, nil)
	e.wantProblem("step on a lost session", 409, body, code, `"generation":1`, `"last_step":2`)
	code, body = e.call("DELETE", "/api/v1/sessions/"+doc.ID, tokenOperator, nil, nil)
	e.wantProblem("close a lost session", 409, body, code, `"generation":1`)
	var got session.Doc
	if code, body := e.call("GET", "/api/v1/sessions/"+doc.ID, tokenOperator, nil, &got); code != 200 || got.Status != session.StatusLost ||
		got.Lost == nil || got.Lost.Generation != 1 || got.Lost.LastStep != 2 {
		t.Fatalf("get lost session: %d %s", code, body)
	}

	// The job is ended and the phone it moved to released, without a step.
	testenv.Eventually(t, 10*time.Second, other.ID+" released the job", func() bool {
		j, err := e.store.Get(e.ctx, doc.JobID)
		return err == nil && jobstore.Finished(j.Status) && len(other.Agent.Jobs()) == 0
	})
	if ops := held.Ops(); ops[protocol.OpScreenshot] != 1 || ops[protocol.OpTap] != 1 || len(ops) != 2 {
		t.Fatalf("killed agent's phone ran %v, want 1 screenshot and 1 tap", ops)
	}
	if ops := other.Ops(); len(ops) != 0 {
		t.Fatalf("the phone the job moved to ran %v, want nothing", ops)
	}
}

// TestSessionAPI: authentication and scopes, bad input named field by
// field (none of it reaching the phone), captures behind presigned URLs,
// a busy answer, a session recovered from the store by another manager
// (a coordinator restart), an idle session ended by its timeout, and job
// submit refusing interactive jobs.
func TestSessionAPI(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	pc := e.startAgent("pc-a", capture.SimOptions{Model: "Pixel-Sim", Tags: []string{"lab"}})

	code, body := e.call("POST", "/api/v1/sessions", "", `{}`, nil)
	e.wantProblem("no token", 401, body, code, "Bearer")
	code, body = e.call("POST", "/api/v1/sessions", tokenReadOnly, `{}`, nil)
	e.wantProblem("read-only token", 403, body, code, "operate scope")
	code, body = e.call("POST", "/api/v1/sessions", tokenOther, `{"project": "lab"}`, nil)
	e.wantProblem("other project", 403, body, code, `project \"lab\" is not among`)
	for _, c := range []struct{ body, field string }{
		{`{"colour": "red"}`, "colour"},
		{`{"idle_timeout": 5}`, "idle_timeout"},
		{`{"idle_timeout": "soon"}`, "idle_timeout"},
		{`{"idle_timeout": "500ms"}`, "idle_timeout"},
		{`{"wait": "-1s"}`, "wait"},
		{`{"device": {"serial": 7}}`, "device.serial"},
		{`{"project": "bad/name"}`, "project"},
		{`{"device": {}} {}`, "body"},
		{`{"device":`, "body"},
		{``, "body"},
	} {
		code, body := e.call("POST", "/api/v1/sessions", tokenOperator, c.body, nil)
		if p := e.wantProblem("open "+c.body, 400, body, code); p.Field != c.field {
			t.Errorf("open %s: field %q, want %q", c.body, p.Field, c.field)
		}
	}
	code, body = e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"tags": ["lab"]}, "x": "`+strings.Repeat("a", session.MaxBodyBytes)+`"}`, nil)
	e.wantProblem("oversized body", 413, body, code)
	code, body = e.call("PUT", "/api/v1/sessions", tokenOperator, `{}`, nil)
	e.wantProblem("PUT", 405, body, code)

	var doc session.Doc
	code, body = e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"model": "Pixel-Sim", "tags": ["lab"]}, "idle_timeout": "2m"}`, &doc)
	if code != 201 || doc.Agent != "pc-a" || doc.Phone != (session.Phone{Serial: "sim-pc-a", Model: "Pixel-Sim"}) ||
		doc.Project != "lab" || doc.Status != session.StatusOpen || doc.IdleTimeout != "2m0s" || e.lastType != "application/json" {
		t.Fatalf("open: %d %s", code, body)
	}
	sess := "/api/v1/sessions/" + doc.ID
	steps := sess + "/steps"

	// The phone is held: another session waits, then answers busy, and
	// leaves no job behind.
	code, body = e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"serial": "sim-pc-a"}, "wait": "300ms"}`, nil)
	e.wantProblem("second session on a held phone", 503, body, code, "no matching phone became free within 300ms")
	queued, err := e.store.ListJobs(e.ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusQueued, jobstore.StatusInProgress}})
	if err != nil || len(queued) != 1 || queued[0].ID != doc.JobID {
		t.Fatalf("live jobs after a busy open: %v, %v; want only %s", queued, err, doc.JobID)
	}

	for _, c := range []struct{ body, field string }{
		{`{"steps": []}`, "steps"},
		{`{"steps": [{"op": "fly"}]}`, "steps[0].op"},
		{`{"steps": [{"op": "screenshot"}, {"op": "tap", "x": -1}]}`, "steps[1].x"},
		{`{"steps": [{"op": "text"}]}`, "steps[0].text"},
		{`{"steps": [{"op": "screenshot", "name": "a/b"}]}`, "steps[0].name"},
		{`{"steps": [{"op": "tap", "effect": {"key": "k"}}]}`, "steps[0].effect"},
		{`{"steps": [{"op": "tap", "x": "1"}]}`, "steps.x"},
		{`{"steps": [{"op": "tap", "speed": 1}]}`, "speed"},
		{`{"step": [{"op": "tap"}]}`, "step"},
		// A step's duration is bounded as the MCP tools bound theirs.
		{`{"steps": [{"op": "wait", "duration_ms": 60001}]}`, "steps[0].duration_ms"},
		{`{"steps": [{"op": "screenshot"}, {"op": "swipe", "x": 1, "y": 1, "x2": 1, "y2": 1, "duration_ms": 10001}]}`, "steps[1].duration_ms"},
	} {
		code, body := e.call("POST", steps, tokenOperator, c.body, nil)
		if p := e.wantProblem("steps "+c.body, 400, body, code); p.Field != c.field {
			t.Errorf("steps %s: field %q, want %q", c.body, p.Field, c.field)
		}
	}
	many := `{"steps": [` + strings.TrimSuffix(strings.Repeat(`{"op": "wait"},`, session.MaxSteps+1), ",") + `]}`
	code, body = e.call("POST", steps, tokenOperator, many, nil)
	e.wantProblem("too many steps", 400, body, code, fmt.Sprintf("at most %d", session.MaxSteps))
	code, body = e.call("POST", steps, tokenOther, `{"steps": [{"op": "tap"}]}`, nil)
	e.wantProblem("other project's session", 403, body, code, "belongs to a project not among the token's projects")
	if strings.Contains(string(body), "lab") {
		t.Errorf("the refusal names the session's project: %s", body)
	}
	code, body = e.call("POST", "/api/v1/sessions/s-0000.1/steps", tokenOperator, `{"steps": [{"op": "tap"}]}`, nil)
	e.wantProblem("unknown session", 404, body, code)
	code, body = e.call("GET", "/api/v1/sessions/nonsense", tokenOperator, nil, nil)
	e.wantProblem("bad session id", 404, body, code)
	if ops := pc.Ops(); len(ops) != 0 {
		t.Fatalf("refused requests reached the phone: %v", ops)
	}

	var rep stepsReply
	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "screenshot", "name": "home"}, {"op": "ui_dump"}]}`, &rep)
	if code != 200 || len(rep.Steps) != 2 {
		t.Fatalf("steps: %d %s", code, body)
	}
	for i, want := range []session.Capture{
		{Name: "home.png", ContentType: "image/png", Key: "jobs/" + doc.JobID + "/g1/home.png"},
		{Name: "ui_dump-002.xml", ContentType: "application/xml", Key: "jobs/" + doc.JobID + "/g1/ui_dump-002.xml"},
	} {
		r := rep.Steps[i]
		if r.Seq != i+1 || r.Outcome != protocol.OutcomeOK || len(r.Captures) != 1 {
			t.Fatalf("step %d: %+v", i, r)
		}
		c := r.Captures[0]
		if c.Name != want.Name || c.ContentType != want.ContentType || c.Key != want.Key || !strings.HasPrefix(c.URL, "http://") {
			t.Fatalf("step %d capture %+v, want %+v with a URL", i, c, want)
		}
		resp, err := http.Get(c.URL)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want.ContentType || len(data) == 0 {
			t.Fatalf("GET %s: %d %q, %d bytes", c.Name, resp.StatusCode, resp.Header.Get("Content-Type"), len(data))
		}
	}

	// A coordinator restart: a manager with nothing in memory recovers
	// the session from its job.
	m2 := e.newManager(e.conn("coord-2", coordinator.InboxPrefix))
	api2 := httptest.NewServer(e.handler(m2))
	defer api2.Close()
	e1 := e.api
	e.api = api2
	var got session.Doc
	if code, body := e.call("GET", sess, tokenOperator, nil, &got); code != 200 || got.Status != session.StatusOpen || got.LastStep != 2 ||
		got.JobID != doc.JobID || got.Phone.Serial != "sim-pc-a" || got.Agent != "pc-a" {
		t.Fatalf("recovered session: %d %s", code, body)
	}
	if code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "tap", "x": 3, "y": 4}]}`, &rep); code != 200 || rep.Steps[0].Seq != 3 {
		t.Fatalf("step on the recovered session: %d %s", code, body)
	}
	var closed session.Doc
	if code, body := e.call("DELETE", sess, tokenOperator, nil, &closed); code != 200 || closed.Status != session.StatusClosed || len(closed.Artifacts) != 4 {
		t.Fatalf("close: %d %s", code, body)
	}
	if code, body := e.call("DELETE", sess, tokenOperator, nil, &closed); code != 200 || closed.Status != session.StatusClosed {
		t.Fatalf("close again: %d %s", code, body)
	}
	e.api = e1 // the first manager learns it from the store
	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "tap"}]}`, nil)
	e.wantProblem("step after close", 410, body, code, `"session_status":"closed"`)
	if ops := pc.Ops(); ops[protocol.OpScreenshot] != 1 || ops[protocol.OpUIDump] != 1 || ops[protocol.OpTap] != 1 || len(ops) != 3 {
		t.Fatalf("phone operations %v, want one each of screenshot, ui_dump, tap", ops)
	}

	// An idle session ends at its idle timeout.
	code, body = e.call("POST", "/api/v1/sessions", tokenOperator, `{"idle_timeout": "1s"}`, &doc)
	if code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	testenv.Eventually(t, 20*time.Second, "the idle session's job failed", func() bool {
		j, err := e.store.Get(e.ctx, doc.JobID)
		return err == nil && j.Status == jobstore.StatusFailed
	})
	code, body = e.call("POST", "/api/v1/sessions/"+doc.ID+"/steps", tokenOperator, `{"steps": [{"op": "tap"}]}`, nil)
	e.wantProblem("step on an idle-ended session", 410, body, code, `"session_status":"ended"`, "interactive job idle")

	// job submit and every other way in refuse interactive jobs.
	_, err = e.store.Submit(e.ctx, jobstore.JobSpec{Task: protocol.Task{Interactive: true}})
	if err == nil || !strings.Contains(err.Error(), "/api/v1/sessions") {
		t.Fatalf("submit of an interactive job: %v, want a refusal pointing to sessions", err)
	}
}
