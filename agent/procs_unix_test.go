//go:build unix

package agent_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/agent/procs"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// procPhone is a phone whose steps start local processes through the job's
// process group, as a capture backend that runs tools would.
type procPhone struct {
	mu   sync.Mutex
	pids []int
}

func (p *procPhone) Inventory() []protocol.Device {
	return []protocol.Device{{Serial: "proc-1", State: "device"}}
}

func (p *procPhone) Acquire(ctx context.Context, _ protocol.DeviceSelector) (agent.Phone, func(), error) {
	return p, func() {}, nil
}

func (p *procPhone) Serial() string                 { return "proc-1" }
func (p *procPhone) OpLog() (capture.Artifact, int) { return capture.Artifact{}, 0 }

// RunStep starts a shell that starts a child of its own, then waits for
// the step's context.
func (p *procPhone) RunStep(ctx context.Context, s protocol.Step) ([]capture.Artifact, error) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $$ $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := procs.Start(ctx, cmd); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, f := range strings.Fields(line) {
		pid, _ := strconv.Atoi(f)
		p.pids = append(p.pids, pid)
	}
	p.mu.Unlock()
	err = procs.Wait(ctx, cmd)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return nil, err
}

func (p *procPhone) started() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.pids...)
}

// TestRevokeKillsProcesses: a revoke stops the job and kills the local
// processes its step started, children included (process group), and
// nothing more is sent for the job.
func TestRevokeKillsProcesses(t *testing.T) {
	leakCheck(t)
	phone := &procPhone{}
	r := newRig(t, rigSetup{phones: phone})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.x"}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the step's processes to start", func() bool { return len(phone.started()) == 2 })
	r.coord.revoke(tok)
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, fencing.ErrRevoked) {
		t.Fatalf("stop cause %v, want revoked", stop.Err)
	}
	r.waitGone(tok.JobID)
	for _, pid := range phone.started() {
		testenv.Eventually(t, 10*time.Second, "process "+strconv.Itoa(pid)+" to die", func() bool {
			return syscall.Kill(pid, 0) != nil || isZombie(pid)
		})
	}
	r.noneAfter(stop)
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(data))
	return len(f) > 2 && f[2] == "Z"
}
