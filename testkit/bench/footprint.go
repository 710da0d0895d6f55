package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/gobuild"
	"github.com/edgeagent/edgeagent/testkit/labs3"
)

// FootprintOptions configures the footprint scenario.
type FootprintOptions struct {
	Common
	// AgentBin is the edgeagent binary; empty builds it with `go build`
	// (the module's source and a Go toolchain are needed then).
	AgentBin string
	Idle     time.Duration // each idle phase (default 30s)
	Settle   time.Duration // before an idle phase is sampled (default 3s)
}

// FootprintPhase is one sampled idle phase of the agent process.
type FootprintPhase struct {
	Name      string
	Window    time.Duration
	RSSEnd    int64
	RSSMax    int64
	HWM       int64
	CPU       float64 // cores
	CPUTime   time.Duration
	Wakeups   float64 // context switches per second, all threads
	Threads   int
	Samples   int
	Connected bool
}

// FootprintReport is what the footprint scenario measured.
type FootprintReport struct {
	Machine Machine
	Options FootprintOptions
	Binary  string
	Size    int64
	Phases  []FootprintPhase
}

// Footprint runs the real edgeagent binary against an SQLite coordinator
// and an in-process S3 (one simulated phone, storage in direct mode) and
// samples its RSS and CPU from /proc: idle after it connected, and idle
// again after one screenshot job.
func Footprint(ctx context.Context, o FootprintOptions) (*FootprintReport, error) {
	if o.Idle <= 0 {
		o.Idle = 30 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Second
	}
	rep := &FootprintReport{Machine: DescribeMachine(), Options: o}
	cc := CoordConfig{LeaseTTL: 30 * time.Second, ReapInterval: time.Second, ScheduleInterval: 500 * time.Millisecond,
		HeartbeatEvery: 5 * time.Second, OfflineAfter: 15 * time.Second, LogLevel: zerolog.InfoLevel}
	sys, err := startSystem(ctx, &o.Common, "footprint", DriverSQLite, cc, coordInProcess)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	bin := o.AgentBin
	if bin == "" {
		o.logf("footprint: go build ./cmd/edgeagent")
		if bin, err = gobuild.Build(ctx, "edgeagent", gobuild.Options{}); err != nil {
			return nil, fmt.Errorf("build edgeagent (give -agent-bin): %w", err)
		}
	}
	rep.Binary = bin
	if fi, err := os.Stat(bin); err == nil {
		rep.Size = fi.Size()
	}
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	defer s3.Close()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	state := filepath.Join(sys.dir, "agent-state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	cfg := fmt.Sprintf(`agent_id: footprint-1
state_dir: %s
log:
  level: info
nats:
  url: %s
storage:
  endpoint: %s
  secure: false
  bucket: %s
  access_key: %s
  secret_key: %s
status:
  listen: 127.0.0.1:%d
devices:
  - serial: sim-1
    simulated: true
`, state, sys.NATS.ClientURL(), s3.Endpoint, s3.Bucket, s3.AccessKey, s3.SecretKey, port)
	cfgPath := filepath.Join(sys.dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write agent config: %w", err)
	}
	logf, err := os.Create(filepath.Join(sys.dir, "agent.log"))
	if err != nil {
		return nil, fmt.Errorf("create agent log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "-c", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start edgeagent: %w", err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	defer stop()
	pid := cmd.Process.Pid
	connected := func() bool {
		a, err := sys.Store.GetAgent(ctx, "footprint-1")
		return err == nil && a.BootID != ""
	}
	if err := waitFor(ctx, 30*time.Second, connected); err != nil {
		select {
		case <-exited:
			return rep, fmt.Errorf("edgeagent exited: %v (see %s)", waitErr, logf.Name())
		default:
		}
		return rep, fmt.Errorf("edgeagent did not say hello: %w", err)
	}
	phase := func(name string) (FootprintPhase, error) {
		o.logf("footprint: %s: settle %v, sample %v", name, o.Settle, o.Idle)
		sleepCtx(ctx, o.Settle)
		p := FootprintPhase{Name: name}
		first := SampleProc(pid)
		if !first.OK {
			return p, fmt.Errorf("sample edgeagent: %s", first.Desc)
		}
		last := first
		p.RSSMax = first.RSS
		for t := time.NewTicker(time.Second); ; {
			select {
			case <-ctx.Done():
				t.Stop()
				return p, ctx.Err()
			case <-exited:
				t.Stop()
				return p, fmt.Errorf("edgeagent exited: %v", waitErr)
			case <-t.C:
			}
			s := SampleProc(pid)
			if s.OK {
				last = s
				p.RSSMax = max(p.RSSMax, s.RSS)
				p.Samples++
			}
			if last.At.Sub(first.At) >= o.Idle {
				t.Stop()
				break
			}
		}
		p.Window = last.At.Sub(first.At)
		p.RSSEnd, p.HWM, p.Threads = last.RSS, last.HWM, last.Threads
		p.CPU = CPUUse(first, last)
		p.CPUTime = last.CPU - first.CPU
		p.Wakeups = float64(last.Switches-first.Switches) / p.Window.Seconds()
		p.Connected = connected()
		return p, nil
	}
	p, err := phase("idle after start")
	if err != nil {
		return rep, err
	}
	rep.Phases = append(rep.Phases, p)

	job, err := sys.Store.Submit(ctx, jobstore.JobSpec{Task: protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.android.settings"},
		{Op: protocol.OpScreenshot, Name: "screen.png"},
		{Op: protocol.OpUIDump, Name: "screen.xml"},
	}}})
	if err != nil {
		return rep, err
	}
	sys.Kick()
	var j jobstore.Job
	if err := waitFor(ctx, 60*time.Second, func() bool {
		j, err = sys.Store.Get(ctx, job.ID)
		return err == nil && jobstore.Finished(j.Status)
	}); err != nil {
		return rep, fmt.Errorf("screenshot job: %w", err)
	}
	if j.Status != jobstore.StatusSucceeded {
		return rep, fmt.Errorf("screenshot job %s: %s", j.Status, j.FailReason)
	}
	if p, err = phase("idle after one screenshot job"); err != nil {
		return rep, err
	}
	rep.Phases = append(rep.Phases, p)
	stop()
	if waitErr != nil {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return rep, fmt.Errorf("stop edgeagent: %w", waitErr)
		}
	}
	return rep, nil
}

// PrintFootprint writes the table of the footprint scenario.
func PrintFootprint(w io.Writer, r *FootprintReport) {
	t := Table{Title: "Idle edgeagent process (one simulated phone, connected to the coordinator, heartbeats every 5s)",
		Header: []string{"phase", "window", "RSS MiB (end)", "RSS max MiB", "VmHWM MiB", "CPU", "CPU time", "wakeups/s", "threads", "target RSS"}}
	for _, p := range r.Phases {
		t.Add(p.Name, p.Window.Round(time.Second).String(), mib(p.RSSEnd), mib(p.RSSMax), mib(p.HWM),
			fmt.Sprintf("%.3f%%", 100*p.CPU), p.CPUTime.String(), fmt.Sprintf("%.1f", p.Wakeups), strconv.Itoa(p.Threads), "≤ 25")
	}
	t.Notes = append(t.Notes, fmt.Sprintf("binary %s (%s MiB); RSS and CPU from /proc/<pid>/status and /proc/<pid>/stat, sampled every second; wakeups: context switches of all its threads per second.", r.Binary, mib(r.Size)))
	t.Print(w)
}
