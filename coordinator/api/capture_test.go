package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestSubmitCaptureAndLogcat: POST /api/v1/jobs takes capture and logcat
// into the job's task (shown by GET); an unknown capture mode is refused
// with 422 naming the field.
func TestSubmitCaptureAndLogcat(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "read", "submit")
	r := e.do("POST", "/api/v1/jobs", tok, `{"capture": "before_after", "logcat": true, "steps": [{"op": "tap", "x": 1, "y": 2}]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var j api.JobView
	r.decode(t, &j)
	r = e.do("GET", "/api/v1/jobs/"+j.ID, tok, "")
	var d api.JobDetail
	r.decode(t, &d)
	if r.status != 200 || d.Task.Capture != protocol.CaptureBeforeAfter || !d.Task.Logcat {
		t.Fatalf("show: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, `{"capture": "sometimes", "steps": [{"op": "tap"}]}`)
	if p := r.problem(t); r.status != http.StatusUnprocessableEntity || p.Type != api.ProblemInvalidJob || p.Field != "capture" || !strings.Contains(p.Detail, "before_after") {
		t.Fatalf("unknown capture mode: %d %s", r.status, r.body)
	}
}
