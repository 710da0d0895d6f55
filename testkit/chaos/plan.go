package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// Kind names a fault.
type Kind string

// Fault kinds.
const (
	// KindAgentPause stops all traffic of one agent process, to NATS and to
	// the storage, for longer than the lease, then lets what it sent in the
	// meantime through in order: a process frozen (GC pause, SIGSTOP, a
	// stalled network) between its lease check and its write.
	KindAgentPause Kind = "agent-pause"
	// KindAgentKill cuts one agent process off from everything at once (kill
	// -9: nothing it does afterwards reaches anyone) and starts a new
	// process of the same agent, with a new boot id, after a downtime.
	KindAgentKill Kind = "agent-kill"
	// KindCoordinatorRestart stops one coordinator (its requests in flight
	// are cut short) and starts a new one after a downtime.
	KindCoordinatorRestart Kind = "coordinator-restart"
	// KindNATSRestart shuts the NATS server down and starts a new one on the
	// same port after a downtime; every client reconnects.
	KindNATSRestart Kind = "nats-restart"
	// KindStoreOutage makes the job store unreachable for the coordinators:
	// with PostgreSQL every connection is terminated and new ones refused
	// (what clients see of a restart); with SQLite every store call fails.
	KindStoreOutage Kind = "store-outage"
	// KindStoreLostReply lets every store write through but answers it with
	// an error, as when the connection breaks after the commit: the
	// coordinator cannot know the write took effect.
	KindStoreLostReply Kind = "store-lost-reply"
	// KindStorageOutage refuses every storage request (503 or a reset
	// connection).
	KindStorageOutage Kind = "storage-outage"
	// KindMsgDelay delays every message of one agent, both ways, order kept.
	KindMsgDelay Kind = "msg-delay"
	// KindMsgDuplicate delivers messages of one agent, both ways, twice, the
	// copy up to Amount later.
	KindMsgDuplicate Kind = "msg-duplicate"
	// KindMsgReorder holds messages of one agent, both ways, for up to
	// Amount while later ones pass.
	KindMsgReorder Kind = "msg-reorder"
	// KindClockJump moves the wall clock the agent's lease guards read by
	// Amount (forward: a suspend; backward: a clock step) for Duration.
	KindClockJump Kind = "clock-jump"
	// KindReassign has the operator move a running job to another agent,
	// with a revoke to the old owner (Mode "revoke") or without ("silent").
	KindReassign Kind = "operator-reassign"
	// KindNATSNodeKill shuts one node of a NATS cluster down (Target is the
	// node) and starts it again on the same ports with the same cluster
	// configuration after Duration; its clients reconnect to the other
	// nodes meanwhile. Drawn only on a cluster (Shape.NATSNodes > 1).
	KindNATSNodeKill Kind = "nats-node-kill"
)

// AllKinds lists every fault kind.
var AllKinds = []Kind{
	KindAgentPause, KindAgentKill, KindCoordinatorRestart, KindNATSRestart,
	KindStoreOutage, KindStoreLostReply, KindStorageOutage,
	KindMsgDelay, KindMsgDuplicate, KindMsgReorder, KindClockJump, KindReassign,
	KindNATSNodeKill,
}

// ClusterKinds are the fault kinds that need a NATS cluster.
var ClusterKinds = []Kind{KindNATSNodeKill}

// DefaultKinds are the kinds drawn by default on natsNodes NATS servers:
// every kind, less those that need a cluster when there is one server.
func DefaultKinds(natsNodes int) []Kind {
	var out []Kind
	for _, k := range AllKinds {
		if natsNodes <= 1 && slices.Contains(ClusterKinds, k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// Fault is one planned fault.
type Fault struct {
	Kind Kind
	// At is when it is armed, from the schedule's start.
	At time.Duration
	// Trigger, when set, defers a fault on an agent to the first message
	// (result, artifact, renew) or storage write (part, put) that agent
	// sends after At; the fault is skipped if none comes soon.
	Trigger string
	// Target is the agent or coordinator index.
	Target int
	// Duration is how long the fault lasts: pause, outage, window, downtime
	// before a restart.
	Duration time.Duration
	// Amount is a delay (msg-delay), how late a copy or a held message may
	// be (msg-duplicate, msg-reorder), or the size of a clock jump.
	Amount time.Duration
	// Prob is the share of messages a msg-duplicate or msg-reorder window
	// acts on.
	Prob float64
	// Mode refines the kind: agent-kill "before" (the triggering message is
	// lost with the process) or "after" (it gets out, its answer does not);
	// storage-outage "503" or "reset"; operator-reassign "revoke" or
	// "silent".
	Mode string
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-19s at %6s", f.Kind, ms(f.At))
	if f.Trigger != "" {
		fmt.Fprintf(&b, " on next %s", f.Trigger)
	}
	switch f.Kind {
	case KindAgentPause, KindAgentKill, KindMsgDelay, KindMsgDuplicate, KindMsgReorder, KindClockJump:
		fmt.Fprintf(&b, " agent %d", f.Target)
	case KindCoordinatorRestart:
		fmt.Fprintf(&b, " coordinator %d", f.Target)
	case KindReassign:
		fmt.Fprintf(&b, " to agent %d", f.Target)
	case KindNATSNodeKill:
		fmt.Fprintf(&b, " node %d", f.Target)
	}
	if f.Duration > 0 {
		fmt.Fprintf(&b, " for %s", ms(f.Duration))
	}
	if f.Amount != 0 {
		fmt.Fprintf(&b, " amount %s", ms(f.Amount))
	}
	if f.Prob > 0 {
		fmt.Fprintf(&b, " p=%.2f", f.Prob)
	}
	if f.Mode != "" {
		fmt.Fprintf(&b, " mode %s", f.Mode)
	}
	return b.String()
}

// JobPlan is one job of a schedule, submitted At from the start. Its
// task's TimeoutMS is its deadline (0: none); MaxAttempts is the attempt
// limit it is submitted with (0: the store's default).
type JobPlan struct {
	ID          string
	At          time.Duration
	Task        protocol.Task
	MaxAttempts int
}

// Shape bounds the schedules NewPlan draws.
type Shape struct {
	Agents         int           // default 3
	PhonesPerAgent int           // jobs an agent runs at once; default 1
	Coordinators   int           // default 2
	MinJobs        int           // default 3
	MaxJobs        int           // default 5
	MinFaults      int           // default 1
	MaxFaults      int           // default 3
	LeaseTTL       time.Duration // default 500ms
	// Window is when jobs are submitted and faults armed, from the start;
	// default 3 × LeaseTTL.
	Window time.Duration
	// Kinds are the faults drawn from; default DefaultKinds(NATSNodes).
	Kinds []Kind
	// NATSNodes is the number of NATS servers: 1 (default) is one embedded
	// server; more is a cluster of embedded servers joined by routes, the
	// coordinators and the agents connected to different nodes.
	NATSNodes int
	// Effects marks the taps of the drawn tasks as effect steps, each with
	// an idempotency key of its own (effects.go).
	Effects bool
	// Recurring is how many recurring schedules (docs/schedules.md) a run
	// creates at its start, each firing every second (recurring.go);
	// default 2, negative: none.
	Recurring int
}

func (s Shape) withDefaults() Shape {
	if s.Agents <= 0 {
		s.Agents = 3
	}
	if s.PhonesPerAgent <= 0 {
		s.PhonesPerAgent = 1
	}
	if s.Coordinators <= 0 {
		s.Coordinators = 2
	}
	if s.MinJobs <= 0 {
		s.MinJobs = 3
	}
	if s.MaxJobs < s.MinJobs {
		s.MaxJobs = max(s.MinJobs, 5)
	}
	if s.MinFaults < 0 {
		s.MinFaults = 0
	}
	if s.MinFaults == 0 && s.MaxFaults == 0 {
		s.MinFaults, s.MaxFaults = 1, 3
	}
	if s.MaxFaults < s.MinFaults {
		s.MaxFaults = s.MinFaults
	}
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = 500 * time.Millisecond
	}
	if s.Window <= 0 {
		s.Window = 3 * s.LeaseTTL
	}
	if s.NATSNodes <= 0 {
		s.NATSNodes = 1
	}
	if len(s.Kinds) == 0 {
		s.Kinds = DefaultKinds(s.NATSNodes)
	}
	switch {
	case s.Recurring == 0:
		s.Recurring = 2
	case s.Recurring < 0:
		s.Recurring = 0
	}
	return s
}

// Plan is one schedule: the system's shape, the jobs and the faults. The
// same seed and shape always give the same plan.
type Plan struct {
	Seed   int64
	Shape  Shape
	Jobs   []JobPlan
	Faults []Fault
	// Recurring are the recurring schedules the run creates at its start.
	Recurring []RecurringPlan
}

// NewPlan draws the schedule of seed.
func NewPlan(seed int64, shape Shape) Plan {
	shape = shape.withDefaults()
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	ttl := shape.LeaseTTL
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	p := Plan{Seed: seed, Shape: shape}
	nj := shape.MinJobs + r.IntN(shape.MaxJobs-shape.MinJobs+1)
	for i := range nj {
		p.Jobs = append(p.Jobs, JobPlan{
			ID:   fmt.Sprintf("s%d-j%d", seed, i),
			At:   between(0, shape.Window*2/3),
			Task: randomTask(r),
		})
	}
	drawPolicy(&p)
	drawRecurring(&p)
	if shape.Effects {
		markEffects(&p)
	}
	nf := shape.MinFaults + r.IntN(shape.MaxFaults-shape.MinFaults+1)
	for range nf {
		f := Fault{Kind: shape.Kinds[r.IntN(len(shape.Kinds))], At: between(0, shape.Window)}
		switch f.Kind {
		case KindAgentPause:
			f.Target = r.IntN(shape.Agents)
			f.Duration = between(ttl*6/5, ttl*5/2)
			if r.IntN(2) == 0 {
				f.Trigger = pick(r, "result", "artifact", "renew")
			}
		case KindAgentKill:
			f.Target = r.IntN(shape.Agents)
			f.Duration = between(0, ttl*3/2)
			if r.IntN(5) < 3 {
				f.Trigger = pick(r, "result", "artifact", "put")
				f.Mode = pick(r, "before", "after")
			}
		case KindCoordinatorRestart:
			f.Target = r.IntN(shape.Coordinators)
			f.Duration = between(0, 2*ttl)
		case KindNATSRestart:
			f.Duration = between(50*time.Millisecond, ttl*3/2)
		case KindStoreOutage:
			f.Duration = between(50*time.Millisecond, ttl*3/2)
		case KindStoreLostReply:
			f.Duration = between(50*time.Millisecond, ttl)
		case KindStorageOutage:
			f.Duration = between(100*time.Millisecond, 2*ttl)
			f.Mode = pick(r, "503", "reset")
		case KindMsgDelay:
			f.Target = r.IntN(shape.Agents)
			f.Duration = between(ttl, 3*ttl)
			f.Amount = between(10*time.Millisecond, ttl/2)
		case KindMsgDuplicate:
			f.Target = r.IntN(shape.Agents)
			f.Duration = between(ttl, 3*ttl)
			f.Amount = between(0, 2*ttl)
			f.Prob = 0.2 + 0.4*r.Float64()
		case KindMsgReorder:
			f.Target = r.IntN(shape.Agents)
			f.Duration = between(ttl, 3*ttl)
			f.Amount = between(10*time.Millisecond, ttl)
			f.Prob = 0.2 + 0.3*r.Float64()
		case KindClockJump:
			f.Target = r.IntN(shape.Agents)
			f.Amount = between(ttl, 5*ttl)
			if r.IntN(5) < 2 {
				f.Amount = -f.Amount
			}
			f.Duration = 100 * time.Millisecond
		case KindReassign:
			f.Target = r.IntN(shape.Agents)
			f.Mode = pick(r, "revoke", "silent")
		case KindNATSNodeKill:
			f.Target = r.IntN(max(shape.NATSNodes, 1))
			f.Duration = between(100*time.Millisecond, 2*ttl)
		}
		p.Faults = append(p.Faults, f)
	}
	return p
}

func pick(r *rand.Rand, choices ...string) string { return choices[r.IntN(len(choices))] }

// generousAttempts is the attempt limit of a job of a schedule that was
// not drawn one: enough that faults seldom use it up, so that jobs are
// still granted again and again and the stale writes of earlier grants
// keep reaching the fencing.
const generousAttempts = 10

// drawPolicy gives some jobs a deadline and an attempt limit, from a random
// source of its own, so that the rest of the plan is the one the seed gave
// before jobs had them. A third of the jobs get a deadline of 4 to 12
// lease TTLs, which a job hit by faults may pass; a quarter an attempt
// limit of 1, 2, 3 or 5, the others generousAttempts. In a quarter of
// the schedules one job is overdue: a wait of 6 TTLs under a deadline of 2
// TTLs, which it can only end by timing out. The checker's deadline and
// attempt rules judge them (docs/reliability.md, section 5.5).
func drawPolicy(p *Plan) {
	r := rand.New(rand.NewPCG(uint64(p.Seed), 0x5bd1e9955bd1e995))
	ttl := p.Shape.LeaseTTL
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if r.IntN(3) == 0 {
			j.Task.TimeoutMS = (4*ttl + time.Duration(r.Int64N(int64(8*ttl)))).Milliseconds()
		}
		j.MaxAttempts = generousAttempts
		if r.IntN(4) == 0 {
			j.MaxAttempts = []int{1, 2, 3, 5}[r.IntN(4)]
		}
	}
	if len(p.Jobs) > 0 && r.IntN(4) == 0 {
		j := &p.Jobs[r.IntN(len(p.Jobs))]
		j.Task.Steps = append([]protocol.Step{{Op: protocol.OpWait, DurationMS: (6 * ttl).Milliseconds()}}, j.Task.Steps...)
		j.Task.TimeoutMS = (2 * ttl).Milliseconds()
	}
}

// randomTask is one to four steps on a simulated phone with at least one
// capture.
func randomTask(r *rand.Rand) protocol.Task {
	var steps []protocol.Step
	n := 1 + r.IntN(4)
	captured := false
	for i := range n {
		switch r.IntN(6) {
		case 0:
			steps = append(steps, protocol.Step{Op: protocol.OpLaunch, Package: "com.example.shop"})
		case 1:
			steps = append(steps, protocol.Step{Op: protocol.OpTap, X: 10 + r.IntN(30), Y: 10 + r.IntN(80)})
		case 2:
			steps = append(steps, protocol.Step{Op: protocol.OpWait, DurationMS: int64(20 + r.IntN(100))})
		case 3:
			steps = append(steps, protocol.Step{Op: protocol.OpUIDump, Name: fmt.Sprintf("ui-%d", i)})
			captured = true
		default:
			steps = append(steps, protocol.Step{Op: protocol.OpScreenshot, Name: fmt.Sprintf("shot-%d", i)})
			captured = true
		}
	}
	if !captured {
		steps = append(steps, protocol.Step{Op: protocol.OpScreenshot, Name: "final"})
	}
	return protocol.Task{Steps: steps}
}

func (p Plan) String() string {
	var b strings.Builder
	s := p.Shape
	nats := "one NATS server"
	if s.NATSNodes > 1 {
		nats = fmt.Sprintf("a %d-node NATS cluster", s.NATSNodes)
	}
	fmt.Fprintf(&b, "seed %d: %d agents × %d phones, %d coordinators, %s, lease TTL %s, %d jobs, %d faults\n",
		p.Seed, s.Agents, s.PhonesPerAgent, s.Coordinators, nats, ms(s.LeaseTTL), len(p.Jobs), len(p.Faults))
	for _, j := range p.Jobs {
		var ops []string
		for _, st := range j.Task.Steps {
			ops = append(ops, st.Op)
		}
		var policy string
		if j.Task.TimeoutMS > 0 {
			policy += fmt.Sprintf(" (timeout %dms)", j.Task.TimeoutMS)
		}
		if j.MaxAttempts > 0 {
			policy += fmt.Sprintf(" (max attempts %d)", j.MaxAttempts)
		}
		fmt.Fprintf(&b, "  job %-12s at %6s: %s%s\n", j.ID, ms(j.At), strings.Join(ops, ", "), policy)
	}
	for i, f := range p.Faults {
		fmt.Fprintf(&b, "  fault %d: %s\n", i, f)
	}
	return b.String()
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}
