package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// staleViewPhones reports one phone as offline to the coordinator (hello
// and heartbeats) while it is usable here, as after a phone came back
// between a heartbeat and an assign: the coordinator's view of the phones
// differs from the agent's.
type staleViewPhones struct {
	agent.Phones
	hidden string
}

func (p staleViewPhones) Inventory() []protocol.Device {
	ds := p.Phones.Inventory()
	for i := range ds {
		if ds[i].Serial == p.hidden {
			ds[i].State = protocol.DeviceOffline
		}
	}
	return ds
}

// launched reports whether a simulated phone launched pkg.
func launched(p *capture.Simulated, pkg string) bool {
	for _, c := range p.History() {
		if c.Op == protocol.OpLaunch && c.Package == pkg {
			return true
		}
	}
	return false
}

// TestAssignRunsOnGrantedPhone: two phones match the job's selector; the
// coordinator grants the job on the one it sees as usable (sim-2), and the
// agent runs it there, not on the first free matching phone of its own
// inventory (sim-1). Real NATS, coordinator, PostgreSQL and MinIO.
func TestAssignRunsOnGrantedPhone(t *testing.T) {
	sys := newSystem(t, 3*time.Second)
	p1 := capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Model: "M", Width: 96, Height: 160})
	p2 := capture.NewSimulated(capture.SimOptions{Serial: "sim-2", Model: "M", Width: 96, Height: 160})
	inv := capture.NewInventory()
	for _, p := range []*capture.Simulated{p1, p2} {
		if err := inv.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	sys.startAgentWith("pc-a", agentSetup{tweak: func(o *agent.Options) {
		o.Phones = staleViewPhones{Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}), hidden: "sim-1"}
	}})
	const pkg = "com.example.granted"
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{
		Device: protocol.DeviceSelector{Model: "M"},
		Steps:  []protocol.Step{{Op: protocol.OpLaunch, Package: pkg}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := sys.waitJob(job.ID, func(j jobstore.Job) bool {
		return j.Status == jobstore.StatusSucceeded || j.Status == jobstore.StatusFailed
	}, "completion")
	if done.Status != jobstore.StatusSucceeded || done.Device != "sim-2" {
		t.Fatalf("job %s on %q (%s), want SUCCEEDED on sim-2", done.Status, done.Device, done.FailReason)
	}
	if launched(p1, pkg) || !launched(p2, pkg) {
		t.Fatalf("the job ran on sim-1: %v, on sim-2: %v; the coordinator granted sim-2", launched(p1, pkg), launched(p2, pkg))
	}
}

// TestAssignRefusesUnusableGrantedPhone: an assign naming a phone the agent
// cannot use is refused and runs nothing on any phone: with 503 when the
// phone is not ready (not connected, not in state device), which costs the
// job no attempt at the coordinator, and with 400 when it does not match
// the task's selector.
func TestAssignRefusesUnusableGrantedPhone(t *testing.T) {
	r := newRig(t, rigSetup{})
	task := protocol.Task{Device: protocol.DeviceSelector{}, Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.example.x"}}}
	for serial, want := range map[string]string{
		"sim-9": "503 granted phone sim-9 is not connected to this agent",
		"sim-1": "400 granted phone sim-1 does not match the task's selector model=other",
	} {
		task := task
		if serial == "sim-1" {
			task.Device.Model = "other"
		}
		err := r.coord.assignOn("pc-a", r.token(1), task, serial)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("assign on %s: err = %v, want %q", serial, err, want)
		}
	}
	r.phone.Unplug()
	err := r.coord.assignOn("pc-a", r.token(1), task, "sim-1")
	if err == nil || !strings.Contains(err.Error(), "503 granted phone sim-1 is in state") {
		t.Errorf("assign on an unplugged phone: err = %v, want a 503 naming its state", err)
	}
	if h := r.phone.History(); len(h) != 0 {
		t.Fatalf("refused assigns ran operations: %+v", h)
	}
}
