package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// InventoryPhones serves phones from a capture.Inventory: one job per phone,
// a capture.Runner per job, and the job's operation log. Captures are
// spooled under spoolDir ("" keeps them in memory).
func InventoryPhones(inv *capture.Inventory, spoolDir string, opts capture.OpLogOptions) Phones {
	return &invPhones{inv: inv, spool: spoolDir, oplog: opts}
}

type invPhones struct {
	inv   *capture.Inventory
	spool string
	rec   *Recovery // probes the phone before each job (recovery.go); may be nil

	mu    sync.Mutex
	oplog capture.OpLogOptions
}

var (
	_ Phones          = (*invPhones)(nil)
	_ BusyReporter    = (*invPhones)(nil)
	_ OpLogConfigurer = (*invPhones)(nil)
	_ UnicodeTyper    = (*invPhones)(nil)
)

func (p *invPhones) Inventory() []protocol.Device { return p.inv.Devices() }

func (p *invPhones) Busy(serial string) bool { return p.inv.Busy(serial) }

func (p *invPhones) TypesUnicode(serial string) (ok, known bool) {
	d, found := p.inv.Get(serial)
	if !found {
		return false, false
	}
	return capture.TypesUnicode(d)
}

func (p *invPhones) SetOpLogOptions(o capture.OpLogOptions) {
	p.mu.Lock()
	p.oplog = o
	p.mu.Unlock()
}

func (p *invPhones) Acquire(jobCtx context.Context, sel protocol.DeviceSelector) (Phone, func(), error) {
	d, release, err := p.inv.AcquireMatching(jobCtx, sel)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire phone: %w", err)
	}
	if p.rec != nil {
		if err := p.rec.BeforeJob(jobCtx, d); err != nil {
			release()
			return nil, nil, fmt.Errorf("acquire phone: %w", err)
		}
	}
	p.mu.Lock()
	log := capture.NewOpLog(p.oplog)
	p.mu.Unlock()
	r := capture.NewRunner(jobCtx, d, capture.RunnerOptions{SpoolDir: p.spool, OpLog: log})
	return &runnerPhone{r: r, log: log}, func() { r.Close(); release() }, nil
}

type runnerPhone struct {
	r    *capture.Runner
	log  *capture.OpLog
	last *protocol.Observation // of the last step run
}

func (p *runnerPhone) Serial() string { return p.r.Device().Serial() }

func (p *runnerPhone) RunStep(ctx context.Context, s protocol.Step) ([]capture.Artifact, error) {
	out, err := p.r.RunStep(ctx, s)
	p.last = out.Observation
	return out.Artifacts, err
}

func (p *runnerPhone) LastObservation() *protocol.Observation { return p.last }

func (p *runnerPhone) Apps() []protocol.AppVersion { return p.r.Apps() }

func (p *runnerPhone) OpLog() (capture.Artifact, int) { return p.log.Artifact(), p.log.Len() }

func (p *runnerPhone) SkipStep(seq int, s protocol.Step, reason string, stepErr error) error {
	return p.r.SkipStep(seq, s, reason, stepErr)
}

// stepSkipper is implemented by a Phone whose operation log can record a
// step the job did not run (docs/protocol.md section 8).
type stepSkipper interface {
	SkipStep(seq int, s protocol.Step, reason string, stepErr error) error
}
