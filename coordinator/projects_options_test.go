package coordinator

import (
	"maps"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// TestProjectLimitsWiring: jobs.default_max_running and
// projects.<name>.max_running reach Options and every grant request.
func TestProjectLimitsWiring(t *testing.T) {
	cfg := config.DefaultCoordinator()
	cfg.Jobs.DefaultMaxRunning = 4
	cfg.Projects = map[string]config.Project{"survey-a": {MaxRunning: 2}, "open": {MaxRunning: 0}}
	opts, err := serverOptions(cfg, System{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"survey-a": 2, "open": 0}
	if opts.DefaultProjectLimit != 4 || !maps.Equal(opts.ProjectLimits, want) {
		t.Fatalf("options: default %d, limits %v; want 4, %v", opts.DefaultProjectLimit, opts.ProjectLimits, want)
	}
	s := &Server{opts: opts}
	req := s.claimRequest(jobstore.Agent{ID: "pc", BootID: "b", Slots: 1})
	if req.DefaultProjectLimit != 4 || !maps.Equal(req.ProjectLimits, want) || !req.Limited() {
		t.Fatalf("claim request: %+v", req)
	}
	if (jobstore.ClaimRequest{ProjectLimits: map[string]int{"open": 0}}).Limited() {
		t.Fatal("a request whose only limit is 0 counts as limited")
	}
}
