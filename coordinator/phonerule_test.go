package coordinator_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestPhoneRule: without selectors every project may use every phone; a
// project with selectors uses only the phones they match (by every field a
// selector sets), which then serve only the projects selecting them; a
// project without selectors uses the phones no project selects; a serial
// two agents report is refused to all. The claim's per-phone projects say
// the same as the refusals.
func TestPhoneRule(t *testing.T) {
	t.Parallel()
	phone := func(serial string, tags ...string) protocol.Device {
		return protocol.Device{Serial: serial, State: protocol.DeviceReady, Tags: tags}
	}
	none := coordinator.NewPhoneRule(nil)
	var nilRule *coordinator.PhoneRule
	for _, r := range []*coordinator.PhoneRule{none, nilRule} {
		if r.Restricts() || r.Refusal("any", "pc", phone("S"), nil) != "" || r.Projects("pc", phone("S")).Projects != nil {
			t.Fatalf("a rule without selectors restricts")
		}
	}
	rule := coordinator.NewPhoneRule(map[string][]config.PhoneSelector{
		"lab":   {{Agent: "pc-lab"}, {Serial: "R1", Tag: "lab"}},
		"both":  {{Agent: "pc-lab"}},
		"ghost": {{Agent: "pc-gone"}},
	})
	cases := []struct {
		project, agent string
		d              protocol.Device
		want           string // "" allowed, else a part of the refusal
	}{
		{"lab", "pc-lab", phone("A"), ""},
		{"both", "pc-lab", phone("A"), ""},
		{"other", "pc-lab", phone("A"), "reserved for project both, lab"},
		{"lab", "pc-x", phone("R1", "lab"), ""},
		{"lab", "pc-x", phone("R1"), "not selected by projects.lab.phones"},
		{"other", "pc-x", phone("R1"), ""},
		{"other", "pc-x", phone("R1", "lab"), "reserved for project lab"},
		{"ghost", "pc-x", phone("B"), "not selected by projects.ghost.phones"},
		{"other", "pc-x", phone("B"), ""},
	}
	for _, c := range cases {
		got := rule.Refusal(c.project, c.agent, c.d, nil)
		if (c.want == "") != (got == "") || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("project %s on %s of %s: refusal %q, want %q", c.project, c.d.Serial, c.agent, got, c.want)
		}
		if allowed := rule.Projects(c.agent, c.d).Allows(c.project); allowed != (got == "") {
			t.Errorf("project %s on %s of %s: the claim allows %v, the refusal says %q", c.project, c.d.Serial, c.agent, allowed, got)
		}
	}

	agents := []jobstore.Agent{
		{ID: "pc-1", Devices: []protocol.Device{phone("S1"), phone("DUP")}},
		{ID: "pc-2", Devices: []protocol.Device{phone("DUP"), phone("S2")}},
	}
	dups := coordinator.DuplicateSerials(agents, 0)
	if len(dups) != 1 || !slices.Equal(dups["DUP"], []string{"pc-1", "pc-2"}) {
		t.Fatalf("duplicates %v, want DUP of pc-1 and pc-2", dups)
	}
	if got := none.Refusal("any", "pc-1", phone("DUP"), dups); !strings.Contains(got, "serial DUP is reported by agents pc-1 and pc-2") {
		t.Errorf("refusal of a duplicated serial %q", got)
	}
	if got := none.Refusal("any", "pc-1", phone("S1"), dups); got != "" {
		t.Errorf("refusal of a serial one agent reports %q", got)
	}
}
