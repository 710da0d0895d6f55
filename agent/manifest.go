package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// ManifestName is the artifact name of a job's manifest (docs/uploads.md,
// The job manifest).
const ManifestName = "manifest.json"

// JobManifest is the content of manifest.json: what the job ran on, and
// how the agent's clock stood against the coordinator's.
type JobManifest struct {
	JobID        string `json:"job_id"`
	Owner        string `json:"owner"`
	Generation   int64  `json:"generation"`
	AgentID      string `json:"agent_id"`
	AgentVersion string `json:"agent_version"`
	// ADBVersion is the adb server's version ("1.0.41"), empty for a phone
	// not reached through adb (a simulated one).
	ADBVersion string `json:"adb_version,omitempty"`
	Serial     string `json:"serial"`
	Model      string `json:"model,omitempty"`
	// StartedAt and EndedAt are the agent's wall clock (UTC) when the job
	// got its phone and when the manifest was written.
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	// FactsStart and FactsEnd are the phone's facts when the job got it and
	// at its end; null when the phone does not report facts.
	FactsStart *protocol.PhoneFacts `json:"facts_start"`
	FactsEnd   *protocol.PhoneFacts `json:"facts_end"`
	// ClockOffsetMS is the agent's wall clock minus the coordinator's
	// database clock, from the lease renewal with the shortest round trip
	// (ClockRTTMS): approximate, within half that round trip. Null when no
	// renewal carried the database time.
	ClockOffsetMS *float64 `json:"clock_offset_ms"`
	ClockRTTMS    *float64 `json:"clock_rtt_ms,omitempty"`
	// Logcat says whether the job's logcat was asked for (task logcat).
	Logcat bool `json:"logcat,omitempty"`
	// Capture is the task's capture mode (before_after), empty for none.
	Capture string `json:"capture,omitempty"`
}

// factsReader is a phone that reports its facts (docs/protocol.md, Phone
// facts).
type factsReader interface {
	Facts(ctx context.Context) (protocol.PhoneFacts, error)
}

// adbVersioner is a phone reached through an adb server.
type adbVersioner interface {
	ADBVersion(ctx context.Context) (string, error)
}

// capturePhone is a Phone backed by a capture.Runner (runnerPhone): it
// takes before/after screenshots and the job's logcat, and has a device.
type capturePhone interface {
	SetBeforeAfter(on bool)
	StartLogcat(ctx context.Context) error
	Logcat(ctx context.Context) (capture.Artifact, error)
	Device() capture.Device
}

func (p *runnerPhone) SetBeforeAfter(on bool) { p.r.SetBeforeAfter(on) }
func (p *runnerPhone) StartLogcat(ctx context.Context) error {
	return p.r.StartLogcat(ctx)
}
func (p *runnerPhone) Logcat(ctx context.Context) (capture.Artifact, error) {
	return p.r.Logcat(ctx)
}
func (p *runnerPhone) Device() capture.Device { return p.r.Device() }

// phoneDevice returns the device behind phone, nil when it has none.
func phoneDevice(phone Phone) capture.Device {
	if cp, ok := phone.(capturePhone); ok {
		return cp.Device()
	}
	return nil
}

// readFacts reads the phone's facts, nil when it does not report them or
// reading failed (logged).
func (j *job) readFacts(phone Phone) *protocol.PhoneFacts {
	fr, ok := phoneDevice(phone).(factsReader)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(j.work, 10*time.Second)
	defer cancel()
	f, err := fr.Facts(ctx)
	if err != nil {
		j.log.Warn().Err(err).Msg("read phone facts for the job manifest")
		return nil
	}
	return &f
}

// startCapture prepares what the task asks of the job's phone besides its
// steps: screenshots around input steps, the logcat window's start, and the
// manifest's first facts. A logcat the phone cannot give fails the job.
func (j *job) startCapture(phone Phone) error {
	j.mu.Lock()
	j.extra.started = time.Now()
	j.mu.Unlock()
	j.extra.factsStart = j.readFacts(phone)
	cp, ok := phone.(capturePhone)
	if j.task.Capture == protocol.CaptureBeforeAfter {
		if !ok {
			return fmt.Errorf("capture %s: the phone cannot take screenshots around steps", protocol.CaptureBeforeAfter)
		}
		cp.SetBeforeAfter(true)
	}
	if j.task.Logcat {
		if !ok {
			return fmt.Errorf("logcat: %w", capture.ErrNoLogcat)
		}
		if err := cp.StartLogcat(j.work); err != nil {
			return fmt.Errorf("logcat: %w", err)
		}
		j.mu.Lock()
		j.extra.logcat = true
		j.mu.Unlock()
	}
	return nil
}

// jobExtras is what startCapture and the renewals gather for the end of
// the job.
type jobExtras struct {
	started    time.Time
	factsStart *protocol.PhoneFacts
	// Clock offset from the renewal with the shortest round trip; guarded
	// by job.mu.
	offset, rtt time.Duration
	clockKnown  bool
	// logcat: the logcat window started (uploadEnd uploads it).
	logcat bool
}

// noteClock keeps the clock offset a renewal shows: the coordinator's
// database clock at the renewal is expires_at − lease_ttl_ms, taken to be
// the middle of the request's round trip on the agent's wall clock.
func (j *job) noteClock(sent, received time.Time, rep protocol.RenewReply) {
	if rep.ExpiresAt.IsZero() || rep.LeaseTTLMS <= 0 {
		return
	}
	db := rep.ExpiresAt.Add(-time.Duration(rep.LeaseTTLMS) * time.Millisecond)
	rtt := received.Sub(sent)
	mid := sent.Round(0).Add(rtt / 2)
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.extra.clockKnown || rtt < j.extra.rtt {
		j.extra.offset, j.extra.rtt, j.extra.clockKnown = mid.Sub(db), rtt, true
	}
}

// manifest builds manifest.json.
func (j *job) manifest(phone Phone) capture.Artifact {
	m := JobManifest{
		JobID: j.tok.JobID, Owner: j.tok.Owner, Generation: j.tok.Generation,
		AgentID: j.a.opts.AgentID, AgentVersion: j.a.opts.Version, Serial: phone.Serial(),
		FactsStart: j.extra.factsStart, FactsEnd: j.readFacts(phone),
		EndedAt: time.Now().UTC(), Logcat: j.task.Logcat, Capture: j.task.Capture,
	}
	if d := phoneDevice(phone); d != nil {
		m.Model = d.Info().Model
		if v, ok := d.(adbVersioner); ok {
			ctx, cancel := context.WithTimeout(j.work, 5*time.Second)
			s, err := v.ADBVersion(ctx)
			cancel()
			if err != nil {
				j.log.Warn().Err(err).Msg("read the adb version for the job manifest")
			}
			m.ADBVersion = s
		}
	}
	j.mu.Lock()
	m.StartedAt = j.extra.started.UTC()
	if j.extra.clockKnown {
		off := float64(j.extra.offset.Microseconds()) / 1000
		rtt := float64(j.extra.rtt.Microseconds()) / 1000
		m.ClockOffsetMS, m.ClockRTTMS = &off, &rtt
	}
	j.mu.Unlock()
	b, _ := json.MarshalIndent(m, "", "  ")
	return capture.NewArtifact(ManifestName, "application/json", append(b, '\n'))
}

// uploadEnd uploads what the job leaves besides its steps' captures, in
// this order: the logcat (task logcat), manifest.json and oplog.jsonl.
func (j *job) uploadEnd(phone Phone) error {
	j.mu.Lock()
	logcat := j.extra.logcat
	j.mu.Unlock()
	if logcat {
		if cp, ok := phone.(capturePhone); ok {
			a, err := cp.Logcat(j.work)
			if err != nil {
				if j.work.Err() != nil {
					return errStopped
				}
				return fmt.Errorf("logcat: %w", err)
			}
			if _, err := j.publish(a); err != nil {
				return err
			}
		}
	}
	if _, err := j.publish(j.manifest(phone)); err != nil {
		return err
	}
	_, err := j.uploadOpLog(phone)
	return err
}
