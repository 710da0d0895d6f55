package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestAssignRefusesBadJobID: the agent refuses (400) an assign whose job id
// is not 1 to 64 characters of [A-Za-z0-9_-] (docs/protocol.md section 2)
// before it runs or stores anything: such an id, an element of every object
// key of the job, could put its objects under another job's prefix (a job
// named victim/g1 would write jobs/victim/g1/g1/…). A 64-character id runs.
func TestAssignRefusesBadJobID(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	for _, id := range []string{"victim/g1", "..", "a..b", "a.b", "a b", "grüße", strings.Repeat("x", 65), strings.Repeat("y", 2000)} {
		tok := fencing.Token{JobID: id, Owner: r.a.Owner(), Generation: 1}
		err := r.coord.assign("pc-a", tok, screenshotTask(1, 0))
		var pe *protocol.Error
		if !errors.Is(err, protocol.ErrBadRequest) || !errors.As(err, &pe) || !strings.Contains(pe.Description, "job_id") || !strings.Contains(pe.Description, "invalid job id") {
			t.Errorf("assign of job %.70q: %v, want 400 naming token.job_id", id, err)
		}
	}
	if h := r.phone.History(); len(h) != 0 {
		t.Errorf("phone operations for refused assigns: %+v", h)
	}
	if up := r.store.uploads(); len(up) != 0 {
		t.Errorf("uploads for refused assigns: %+v", up)
	}
	if reqs := r.coord.requests(""); len(reqs) > 0 {
		for _, q := range reqs {
			if q.tok.JobID != "" {
				t.Errorf("a request for job %.70q of a refused assign: %s", q.tok.JobID, q.verb)
			}
		}
	}
	ok := fencing.Token{JobID: strings.Repeat("j", 64), Owner: r.a.Owner(), Generation: 1}
	if err := r.coord.assign("pc-a", ok, screenshotTask(1, 0)); err != nil {
		t.Fatalf("assign of a 64-character id: %v", err)
	}
	r.waitGone(ok.JobID)
	if up := r.store.uploads(); len(up) == 0 || !strings.HasPrefix(up[0].key, "jobs/"+ok.JobID+"/g1/") {
		t.Errorf("uploads of the 64-character job: %+v", up)
	}
}
