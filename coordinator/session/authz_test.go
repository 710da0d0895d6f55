package session_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSessionOfAnotherProjectLeftUntouched: with the real edgecoord
// binary, a session of project lab whose job moved to another phone while
// the coordinator restarted (so that the coordinator would find it lost
// and cancel its job on the next look) is asked for by tokens of project
// other: an operate token's MCP screenshot, a read token's GET, and an
// operate token's steps and close. Each is refused (a tool error through
// MCP, 403 through the API) and the job stays exactly as it was, still
// running on the phone it moved to. The owner's own GET then finds the
// session lost and ends the job.
func TestSessionOfAnotherProjectLeftUntouched(t *testing.T) {
	e := newBinaryEnv(t, 1500*time.Millisecond)
	agents := map[string]*e2e.SimAgent{"pc-a": e.startAgent("pc-a", capture.SimOptions{}), "pc-b": e.startAgent("pc-b", capture.SimOptions{})}
	reader := e.bin.Token(t, "rob", "other", "read")

	var doc session.Doc
	if code, body := e.call("POST", "/api/v1/sessions", tokenOperator, map[string]any{"device": map[string]any{}, "idle_timeout": "5m"}, &doc); code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	held, other := agents[doc.Agent], agents["pc-a"]
	if doc.Agent == "pc-a" {
		other = agents["pc-b"]
	}
	if held == nil || doc.Project != "lab" {
		t.Fatalf("opened %+v", doc)
	}

	// The coordinator forgets the session; meanwhile its phone's agent
	// dies and the job moves to the other agent's phone.
	e.bin.MustCleanShutdown(t)
	held.Kill()
	e.bin.Start()
	var moved jobstore.Job
	testenv.Eventually(t, 20*time.Second, "the job taken over by "+other.ID, func() bool {
		j, err := e.store.Get(e.ctx, doc.JobID)
		moved = j
		return err == nil && j.Generation >= 2 && j.Status == jobstore.StatusInProgress &&
			strings.HasPrefix(j.WorkerID, other.ID+"/") && len(other.Agent.Jobs()) == 1
	})

	// Through MCP first: a tool call of another project's operate token.
	mc := sdk.NewClient(&sdk.Implementation{Name: "authz-test", Version: "1"}, nil)
	cs, err := mc.Connect(e.ctx, &sdk.StreamableClientTransport{Endpoint: e.bin.Base + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearerRT{token: e.token(tokenOther)}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", api.MCPPath, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(e.ctx, &sdk.CallToolParams{Name: mcp.ToolScreenshot, Arguments: map[string]any{"session_id": doc.ID}})
	if err != nil || !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "not among the token's projects") {
		t.Fatalf("MCP screenshot by another project: %v %+v, want a tool error naming the projects", err, res)
	}

	path := "/api/v1/sessions/" + doc.ID
	code, body := e.call("GET", path, reader, nil, nil)
	e.wantProblem("another project's read token", 403, body, code, "not among the token's projects")
	code, body = e.call("POST", path+"/steps", tokenOther, `{"steps": [{"op": "screenshot"}]}`, nil)
	e.wantProblem("another project's steps", 403, body, code, "not among the token's projects")
	code, body = e.call("DELETE", path, tokenOther, nil, nil)
	e.wantProblem("another project's close", 403, body, code, "not among the token's projects")

	j, err := e.store.Get(e.ctx, doc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobstore.StatusInProgress || j.Generation != moved.Generation || j.WorkerID != moved.WorkerID || j.FailReason != "" {
		t.Fatalf("after the refused requests the job is %s at generation %d on %s (%q); want it untouched: %s at %d on %s",
			j.Status, j.Generation, j.WorkerID, j.FailReason, moved.Status, moved.Generation, moved.WorkerID)
	}
	if n := len(other.Agent.Jobs()); n != 1 {
		t.Fatalf("after the refused requests agent %s runs %d jobs, want the session's job still running", other.ID, n)
	}

	// The owner's look finds it lost, which ends the job.
	var got session.Doc
	if code, body := e.call("GET", path, tokenOperator, nil, &got); code != 200 || got.Status != session.StatusLost {
		t.Fatalf("owner's get: %d %s", code, body)
	}
	testenv.Eventually(t, 10*time.Second, other.ID+" released the job", func() bool {
		j, err := e.store.Get(e.ctx, doc.JobID)
		return err == nil && jobstore.Finished(j.Status) && len(other.Agent.Jobs()) == 0
	})
}

// bearerRT adds an API token to every request, as an MCP client
// configured with an Authorization header does.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
