package coordinator

import (
	"maps"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestProjectLimitsWiring: jobs.default_max_running and
// projects.<name>.max_running reach Options and every grant request.
func TestProjectLimitsWiring(t *testing.T) {
	t.Parallel()
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

// TestPhoneRuleWiring: projects.<name>.phones reach Options and every
// grant request, each phone with the projects it may serve; a serial two
// online agents report is left out of the grant request.
func TestPhoneRuleWiring(t *testing.T) {
	t.Parallel()
	cfg := config.DefaultCoordinator()
	cfg.Projects = map[string]config.Project{"lab": {Phones: []config.PhoneSelector{{Agent: "pc-lab"}}}}
	opts, err := serverOptions(cfg, System{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Phones.Restricts() {
		t.Fatal("options: no phone rule")
	}
	s := &Server{opts: opts, dups: map[string][]string{"DUP": {"pc-lab", "pc-x"}}}
	ready := func(serial string) protocol.Device {
		return protocol.Device{Serial: serial, State: protocol.DeviceReady}
	}
	req := s.claimRequest(jobstore.Agent{ID: "pc-lab", BootID: "b", Slots: 1, Devices: []protocol.Device{ready("L1"), ready("DUP")}})
	if len(req.Devices) != 1 || req.Devices[0].Serial != "L1" {
		t.Fatalf("claim request devices %+v, want L1 alone (DUP is reported twice)", req.Devices)
	}
	if dp := req.DeviceProjects["L1"]; !dp.Only || !slices.Equal(dp.Projects, []string{"lab"}) {
		t.Fatalf("projects of L1 %+v, want lab only", dp)
	}
	req = s.claimRequest(jobstore.Agent{ID: "pc-x", BootID: "b", Slots: 1, Devices: []protocol.Device{ready("X1")}})
	if dp := req.DeviceProjects["X1"]; dp.Only || !slices.Equal(dp.Projects, []string{"lab"}) || dp.Allows("lab") || !dp.Allows("other") {
		t.Fatalf("projects of X1 %+v, want every project but lab", dp)
	}
	if req := (&Server{opts: Options{}}).claimRequest(jobstore.Agent{ID: "pc", BootID: "b", Devices: []protocol.Device{ready("P")}}); req.DeviceProjects != nil {
		t.Fatalf("without a rule the claim restricts phones: %+v", req.DeviceProjects)
	}
}
