package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/agent/selfupdate"
	"github.com/edgeagent/edgeagent/protocol"
)

// Self-updates (docs/updates.md): the control command update makes the
// agent take no new job, wait for its running jobs (handing back those
// that outlast update.drain_timeout), download and check the signed
// release, swap it in beside the running binary and exit with
// ExitUpdate so that the service manager starts it. The new binary is on
// trial until the coordinator accepts its hello.

// ExitUpdate is the exit status of an agent that swapped in a new binary,
// or put the previous one back, and exits so that the service manager
// starts it (EX_TEMPFAIL; the systemd unit restarts on it, and so do the
// Windows service's recovery actions).
const ExitUpdate = 75

// ErrUpdateRestart is Run's error when the agent exits for an update: the
// process exits with ExitUpdate.
var ErrUpdateRestart = errors.New("exiting so that the service manager starts the updated binary")

// UpdateDir is the state directory's subdirectory for downloads.
const UpdateDir = "update"

// UpdateOptions configure self-updates; the zero value refuses every
// update.
type UpdateOptions struct {
	// Auto: updates ordered by the coordinator are carried out (config
	// update.auto); false refuses them as opted_out.
	Auto bool
	// PublicKey is the release public key; nil refuses every update.
	PublicKey ed25519.PublicKey
	// DrainTimeout bounds the wait for running jobs; default 10 minutes.
	DrainTimeout time.Duration
	// Executable is the path of the running binary, resolved at start
	// (it is renamed during a swap).
	Executable string
	// Trial is what selfupdate.Begin found in the update record at start.
	Trial selfupdate.Trial
	// Client downloads the release; default one that follows no
	// redirect.
	Client *http.Client
}

// updateState is the agent's self-update state, under Agent.mu.
type updateState struct {
	status   *protocol.UpdateStatus // reported in hello and heartbeat
	running  bool                   // an update is under way: no new jobs
	checking bool                   // an order is being checked
	trial    bool                   // this binary is on trial
	trialEnd chan struct{}          // closed when the trial passed
}

// initUpdate takes over what the update record said at start.
func (a *Agent) initUpdate() {
	t := a.opts.Update.Trial
	if t.Record.State != "" {
		a.upd.status = t.Record.Status()
	}
	a.upd.trial = t.OnTrial
	a.upd.trialEnd = make(chan struct{})
	if a.opts.Update.DrainTimeout <= 0 {
		a.opts.Update.DrainTimeout = 10 * time.Minute
	}
	if a.opts.Update.Client == nil {
		a.opts.Update.Client = apkClient
	}
}

// updateStatusLocked is a copy of the update state to report, nil when
// there is none.
func (a *Agent) updateStatusLocked() *protocol.UpdateStatus {
	if a.upd.status == nil {
		return nil
	}
	s := *a.upd.status
	return &s
}

// UpdateStatus is the agent's update state now, nil when it has none.
func (a *Agent) UpdateStatus() *protocol.UpdateStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.updateStatusLocked()
}

// setUpdate records the update state, in the update record too, and
// reports it in a heartbeat now.
func (a *Agent) setUpdate(state string, o protocol.UpdateOrder, outcome string) {
	now := time.Now()
	r := selfupdate.Record{State: state, From: a.opts.Version, Target: clipText(o.Release.Version, 64), Outcome: clipText(outcome, 1000),
		RolloutID: clipText(o.RolloutID, 128), AtUnixMilli: now.UnixMilli()}
	a.mu.Lock()
	a.upd.status = r.Status()
	a.mu.Unlock()
	if a.opts.StateDir != "" && state != protocol.UpdateRestarting {
		if err := selfupdate.SaveRecord(a.opts.StateDir, r); err != nil {
			a.log.Warn().Err(err).Msg("save update record")
		}
	}
	a.beatNow()
}

// clipText cuts s to n bytes: what a refused order carried is reported
// back, bounded.
func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// onUpdate answers the control command update: Ack when the update is
// under way, else a refusal saying why (also reported as the update
// state).
func (a *Agent) onUpdate(m *nats.Msg, o *protocol.UpdateOrder) {
	if o == nil {
		replyError(m, protocol.CodeBadRequest, "update: the control command update carries no release")
		return
	}
	// An update under way or on trial keeps its state (and its record):
	// a second order is answered without touching them.
	a.mu.Lock()
	busy := ""
	switch {
	case a.upd.running, a.upd.checking:
		busy = "an update is already under way"
	case a.upd.trial:
		busy = "this binary is still on trial from the last update"
	case a.shutdown || a.closing || a.runCtx == nil:
		busy = "agent shutting down"
	}
	if busy == "" {
		// A second order arriving during the checks is busy.
		a.upd.checking = true
	}
	a.mu.Unlock()
	if busy != "" {
		replyError(m, protocol.CodeUnavailable, busy)
		return
	}
	if code, state, why := a.checkUpdate(*o); why != "" {
		a.log.Warn().Str("target", clipText(o.Release.Version, 64)).Str("state", state).Str("reason", why).Msg("update refused")
		a.mu.Lock()
		a.upd.checking = false
		a.mu.Unlock()
		a.setUpdate(state, *o, why)
		replyError(m, code, why)
		return
	}
	a.mu.Lock()
	ctx := a.runCtx
	a.upd.checking = false
	if a.shutdown || a.closing {
		a.mu.Unlock()
		replyError(m, protocol.CodeUnavailable, "agent shutting down")
		return
	}
	a.upd.running = true
	a.wg.Add(1)
	a.mu.Unlock()
	a.metrics.draining.Set(1)
	a.setUpdate(protocol.UpdateDraining, *o, "")
	a.kickHello()
	reply(m, protocol.Ack{OK: true})
	go func() {
		defer a.wg.Done()
		a.runUpdate(ctx, *o)
	}()
}

// checkUpdate refuses an update order the agent must not carry out: the
// reply code, the state to report and why; why is "" when the order is to
// be carried out.
func (a *Agent) checkUpdate(o protocol.UpdateOrder) (code int, state, why string) {
	u := a.opts.Update
	rel := o.Release
	refuse := func(format string, args ...any) (int, string, string) {
		return protocol.CodeBadRequest, protocol.UpdateRefused, fmt.Sprintf(format, args...)
	}
	switch {
	case !u.Auto:
		return protocol.CodeForbidden, protocol.UpdateOptedOut, "update.auto is false: this agent does not update on its own"
	case u.PublicKey == nil:
		return protocol.CodeForbidden, protocol.UpdateRefused, "no update.public_key configured: this agent trusts no release"
	}
	if err := rel.Validate(); err != nil {
		return refuse("release.%v", err)
	}
	if pu, err := url.Parse(o.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || len(o.URL) > 16<<10 {
		return refuse("url: not an http(s) URL")
	}
	if rel.OS != runtime.GOOS || rel.Arch != runtime.GOARCH {
		return refuse("release for %s/%s: this agent runs on %s/%s", rel.OS, rel.Arch, runtime.GOOS, runtime.GOARCH)
	}
	target, _ := protocol.ParseVersion(rel.Version)
	// A build without a release version (dev) updates to any release.
	if cur, err := protocol.ParseVersion(a.opts.Version); err == nil {
		switch c := target.Compare(cur); {
		case c == 0:
			return refuse("already running %s", a.opts.Version)
		case c < 0 && !o.AllowDowngrade:
			return refuse("%s is older than the running %s: a downgrade needs allow_downgrade", rel.Version, a.opts.Version)
		}
	}
	if err := rel.Verify(u.PublicKey); err != nil {
		return refuse("release signature does not verify under update.public_key: not updating")
	}
	if u.Executable == "" || a.opts.StateDir == "" {
		return protocol.CodeUnavailable, protocol.UpdateFailed, "this agent does not know its own binary or state directory"
	}
	if err := selfupdate.CheckWritable(u.Executable); err != nil {
		return protocol.CodeUnavailable, protocol.UpdateFailed, err.Error()
	}
	return 0, "", ""
}

// runUpdate carries out an accepted update: drain, download, check, swap,
// exit. Any failure reports why and takes jobs again.
func (a *Agent) runUpdate(ctx context.Context, o protocol.UpdateOrder) {
	rel := o.Release
	log := a.log.With().Str("target", rel.Version).Str("rollout_id", clipText(o.RolloutID, 128)).Logger()
	log.Info().Dur("drain_timeout", a.opts.Update.DrainTimeout).Msg("update: taking no new job, waiting for the running ones")
	dctx, cancel := context.WithTimeout(ctx, a.opts.Update.DrainTimeout)
	drained := a.waitJobs(dctx)
	cancel()
	if !drained && ctx.Err() == nil {
		a.mu.Lock()
		jobs := make([]*job, 0, len(a.jobs))
		for _, j := range a.jobs {
			jobs = append(jobs, j)
		}
		a.mu.Unlock()
		log.Warn().Int("running", len(jobs)).Msg("update: jobs outlasted update.drain_timeout: handing them back")
		for _, j := range jobs {
			j.releaseFor("agent updating to "+rel.Version, protocol.CauseAgentUpdate)
		}
		a.waitJobs(ctx)
	}
	if ctx.Err() != nil {
		a.endUpdate(protocol.UpdateFailed, o, "the agent stopped before the update was carried out")
		return
	}

	a.setUpdate(protocol.UpdateDownloading, o, "")
	dir := filepath.Join(a.opts.StateDir, UpdateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		a.endUpdate(protocol.UpdateFailed, o, "download: "+err.Error())
		return
	}
	part := filepath.Join(dir, fmt.Sprintf("edgeagent-%s-%s-%s-%s.part", rel.Version, rel.OS, rel.Arch, rel.SHA256[:16]))
	if err := a.download(ctx, o.URL, part, rel.Size); err != nil {
		a.endUpdate(mismatchState(err), o, err.Error())
		return
	}
	exe := a.opts.Update.Executable
	newPath, err := selfupdate.Place(part, exe, rel)
	if err != nil {
		a.endUpdate(mismatchState(err), o, err.Error())
		return
	}
	rec := selfupdate.Record{State: protocol.UpdateRestarting, From: a.opts.Version, Target: rel.Version,
		RolloutID: clipText(o.RolloutID, 128), AtUnixMilli: time.Now().UnixMilli()}
	if err := selfupdate.SaveRecord(a.opts.StateDir, rec); err != nil {
		_ = os.Remove(newPath)
		a.endUpdate(protocol.UpdateFailed, o, err.Error())
		return
	}
	if err := selfupdate.Swap(exe, newPath); err != nil {
		_ = os.Remove(newPath)
		a.endUpdate(protocol.UpdateFailed, o, err.Error())
		return
	}
	_ = os.Remove(part)
	a.setUpdate(protocol.UpdateRestarting, o, "")
	log.Info().Str("executable", exe).Int("exit_code", ExitUpdate).Msg("update: new binary in place, previous one kept as " + filepath.Base(exe) + selfupdate.PrevSuffix + "; exiting so that the service manager starts it")
	// Tell the coordinator before leaving; it hears the rest from the new
	// binary's hello.
	hctx, hcancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	if err := a.heartbeat(hctx); err != nil {
		log.Debug().Err(err).Msg("heartbeat before the update restart")
	}
	hcancel()
	a.mu.Lock()
	stop := a.cancelRun
	a.mu.Unlock()
	if stop != nil {
		stop(ErrUpdateRestart)
	}
}

// download fetches the release into part, resuming after a broken
// transfer: up to 5 tries, 1 s apart and doubling. A binary that is not
// the release is not tried again.
func (a *Agent) download(ctx context.Context, rawURL, part string, size int64) error {
	wait := time.Second
	var err error
	for try := 1; ; try++ {
		var have int64
		if fi, err := os.Stat(part); err == nil && fi.Size() < size {
			have = fi.Size()
		}
		a.log.Info().Int64("size", size).Int64("resume_from", have).Int("try", try).Msg("update: downloading")
		if err = selfupdate.Download(ctx, a.opts.Update.Client, rawURL, part, size); err == nil || errors.Is(err, selfupdate.ErrMismatch) || try == 5 {
			return err
		}
		a.log.Warn().Err(err).Int("try", try).Dur("retry_in", wait).Msg("update: download failed")
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// mismatchState is the state an update ends in after err: refused when the
// binary was not the release, failed otherwise.
func mismatchState(err error) string {
	if errors.Is(err, selfupdate.ErrMismatch) {
		return protocol.UpdateRefused
	}
	return protocol.UpdateFailed
}

// endUpdate ends an update that swapped nothing: it reports state and why
// and takes jobs again.
func (a *Agent) endUpdate(state string, o protocol.UpdateOrder, why string) {
	a.log.Warn().Str("target", o.Release.Version).Str("state", state).Str("reason", why).Msg("update not carried out: taking jobs again")
	a.setUpdate(state, o, why)
	a.mu.Lock()
	a.upd.running = false
	draining := a.draining || a.shutdown || a.sleeping
	a.mu.Unlock()
	a.metrics.draining.Set(b2f(draining))
	a.kickHello()
}

// helloAccepted ends the trial of a new binary: the update is done.
func (a *Agent) helloAccepted() {
	a.mu.Lock()
	if !a.upd.trial {
		a.mu.Unlock()
		return
	}
	a.upd.trial = false
	close(a.upd.trialEnd)
	a.mu.Unlock()
	r, err := selfupdate.Healthy(a.opts.StateDir, a.opts.Update.Trial.Record, time.Now())
	if err != nil {
		a.log.Warn().Err(err).Msg("save update record")
	}
	a.mu.Lock()
	a.upd.status = r.Status()
	a.mu.Unlock()
	a.log.Info().Str("from", r.From).Str("version", r.Target).Msg("update done: the coordinator accepted this binary's hello")
	a.beatNow()
}

// watchTrial puts the previous binary back when the trial's deadline
// passes before a hello is accepted, and stops Run with ErrUpdateRestart.
func (a *Agent) watchTrial(ctx context.Context) {
	t := a.opts.Update.Trial
	timer := time.NewTimer(time.Until(t.Deadline))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-a.upd.trialEnd:
		return
	case <-timer.C:
	}
	a.mu.Lock()
	if !a.upd.trial {
		a.mu.Unlock()
		return
	}
	a.upd.trial = false
	stop := a.cancelRun
	a.mu.Unlock()
	why := fmt.Sprintf("%s had no hello accepted by the coordinator within update.health_timeout", t.Record.Target)
	_, err := selfupdate.RollBack(a.opts.StateDir, a.opts.Update.Executable, t.Record, why, time.Now())
	if !errors.Is(err, selfupdate.ErrRolledBack) {
		a.log.Error().Err(err).Msg("update: putting the previous binary back failed")
		return
	}
	a.log.Error().Str("reason", why).Int("exit_code", ExitUpdate).Msg("update: previous binary put back; exiting so that the service manager starts it")
	if stop != nil {
		stop(ErrUpdateRestart)
	}
}
