package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// factsPhone is a simulated phone that reports facts.
type factsPhone struct {
	*capture.Simulated
	reads int
	mu    sync.Mutex
}

func (p *factsPhone) Facts(context.Context) (protocol.PhoneFacts, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	level := 90 - p.reads
	return protocol.PhoneFacts{AndroidVersion: "14", SDK: 34, BatteryLevel: &level}, nil
}

// seenStore records the artifacts handed to the upload spool.
type seenStore struct {
	next uploader.Uploader
	mu   sync.Mutex
	seen []uploader.Artifact
}

func (s *seenStore) Upload(ctx context.Context, tok fencing.Token, a uploader.Artifact) (uploader.Result, error) {
	s.mu.Lock()
	s.seen = append(s.seen, a)
	s.mu.Unlock()
	return s.next.Upload(ctx, tok, a)
}

// TestEndToEndCaptureExtras: a task with capture before_after and logcat,
// through NATS, PostgreSQL, the upload spool and MinIO, on a phone that
// reports facts. Every input step has distinct screenshots before and
// after it; a recording longer than the phone's (shortened) time limit is
// stored as chained segments and its op log line says so; the logcat holds
// the job's lines only; manifest.json has the facts at start and end and
// the clock offset; every capture reached the spool hashed as it was
// written (not read again), and every stored object's sha256 is that of
// its stored bytes.
func TestEndToEndCaptureExtras(t *testing.T) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	dir := t.TempDir()
	spool, err := uploader.NewSpool(filepath.Join(dir, "uploads"), sys.s3, uploader.SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := &seenStore{next: spool}
	phone := &factsPhone{Simulated: capture.NewSimulated(capture.SimOptions{Serial: "sim-facts", Width: 160, Height: 320,
		RecordLimit: 300 * time.Millisecond, RecordingSize: 2048})}
	inv := capture.NewInventory()
	if err := inv.Add(phone); err != nil {
		t.Fatal(err)
	}
	sys.startAgentWith("pc-a", agentSetup{tweak: func(o *agent.Options) {
		o.Phones = agent.InventoryPhones(inv, dir, capture.OpLogOptions{})
		o.Store = store
		o.Version = "1.2.3-test"
	}})
	phone.Log("Before", "logged before the job")

	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{
		Capture: protocol.CaptureBeforeAfter, Logcat: true,
		Steps: []protocol.Step{
			{Op: protocol.OpLaunch, Package: "com.example.app"},
			{Op: protocol.OpTap, X: 10, Y: 20},
			{Op: protocol.OpRecordStart},
			{Op: protocol.OpWait, DurationMS: 1000},
			{Op: protocol.OpRecordStop},
			{Op: protocol.OpScreenshot, Name: "end"},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	done := sys.waitJob(job.ID, func(j jobstore.Job) bool {
		return j.Status != jobstore.StatusQueued && j.Status != jobstore.StatusInProgress
	}, "completion")
	if done.Status != jobstore.StatusSucceeded {
		t.Fatalf("job status %s (%s), want SUCCEEDED", done.Status, done.FailReason)
	}
	phone.Log("After", "logged after the job")

	raw := sys.mio.Client(t)
	get := func(name string) []byte {
		t.Helper()
		obj, err := raw.GetObject(sys.ctx, sys.mio.Bucket, "jobs/"+job.ID+"/g1/"+name, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		b, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return b
	}
	arts, err := sys.store.Artifacts(sys.ctx, job.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range arts {
		names = append(names, a.Name)
		b := get(a.Name)
		sum := sha256.Sum256(b)
		obj, err := sys.s3.Stat(sys.ctx, a.Key)
		if err != nil {
			t.Fatal(err)
		}
		if a.SHA256 != hex.EncodeToString(sum[:]) || obj.SHA256 != a.SHA256 || a.Size != int64(len(b)) {
			t.Errorf("%s: registered sha256 %s, metadata %s, stored bytes hash to %x (%d bytes, registered %d)", a.Name, a.SHA256, obj.SHA256, sum, len(b), a.Size)
		}
	}
	slices.Sort(names)
	want := []string{
		"end.png", capture.LogcatName, agent.ManifestName, capture.OpLogName,
		"recording-003-1.mp4", "recording-003-2.mp4",
		"screenshot-001-1-before.png", "screenshot-001-2-after.png",
		"screenshot-002-1-before.png", "screenshot-002-2-after.png",
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("artifact %s missing; stored: %q", w, names)
		}
	}
	if bytes.Equal(get("screenshot-002-1-before.png"), get("screenshot-002-2-after.png")) {
		t.Error("the screenshots before and after the tap are the same")
	}

	// Captures reached the spool as files hashed while they were written.
	store.mu.Lock()
	for _, a := range store.seen {
		if strings.HasSuffix(a.Name, ".png") || strings.HasSuffix(a.Name, ".mp4") || a.Name == capture.LogcatName {
			if a.Path == "" || !a.Hashed || a.SHA256 == "" {
				t.Errorf("%s handed to the spool with path %q hashed %v sha256 %q; want a spool file hashed as written", a.Name, a.Path, a.Hashed, a.SHA256)
			}
		}
	}
	store.mu.Unlock()

	logcat := string(get(capture.LogcatName))
	if !strings.Contains(logcat, "tap at 10,20") || strings.Contains(logcat, "Before:") || strings.Contains(logcat, "After:") {
		t.Errorf("logcat.txt does not hold exactly the job's window:\n%s", logcat)
	}

	var m agent.JobManifest
	if err := json.Unmarshal(get(agent.ManifestName), &m); err != nil {
		t.Fatal(err)
	}
	if m.FactsStart == nil || m.FactsEnd == nil || m.FactsStart.SDK != 34 || *m.FactsEnd.BatteryLevel >= *m.FactsStart.BatteryLevel {
		t.Errorf("manifest facts: start %+v, end %+v; want both, read at start and at the end", m.FactsStart, m.FactsEnd)
	}
	if m.AgentVersion != "1.2.3-test" || m.Serial != "sim-facts" || m.JobID != job.ID || m.Generation != 1 || m.ADBVersion != "" {
		t.Errorf("manifest = %+v", m)
	}
	// Agent and database run on this machine: the offset is that of two
	// readings of one clock, within the round trip it was measured over.
	if m.ClockOffsetMS == nil || m.ClockRTTMS == nil || math.Abs(*m.ClockOffsetMS) > *m.ClockRTTMS/2+50 {
		t.Errorf("manifest clock offset %v ms (round trip %v ms); want one near zero", m.ClockOffsetMS, m.ClockRTTMS)
	}

	var stop, tap capture.OpEntry
	for _, line := range strings.Split(strings.TrimSpace(string(get(capture.OpLogName))), "\n") {
		var e capture.OpEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Op {
		case protocol.OpRecordStop:
			stop = e
		case protocol.OpTap:
			tap = e
		}
	}
	if !strings.Contains(stop.Warning, "chained at the phone's time limit of 0.3s") || len(stop.Artifacts) < 2 {
		t.Errorf("record_stop op log line: warning %q, %d artifacts; want the recording chained", stop.Warning, len(stop.Artifacts))
	}
	if len(tap.Artifacts) != 2 || tap.Artifacts[0].Name != "screenshot-002-1-before.png" || tap.Artifacts[1].Name != "screenshot-002-2-after.png" {
		t.Errorf("tap op log line artifacts = %+v", tap.Artifacts)
	}
}

// plainPhone is a phone that has only the methods of capture.Device: no
// facts, no logcat.
type plainPhone struct{ capture.Device }

// TestManifestFacts: the manifest of a job on a phone that reports facts
// (the simulated phone) has them at start and end; on a phone that does not,
// they are null.
func TestManifestFacts(t *testing.T) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	inv := capture.NewInventory()
	if err := inv.Add(plainPhone{capture.NewSimulated(capture.SimOptions{Serial: "sim-plain", Model: "Plain", Width: 160, Height: 320})}); err != nil {
		t.Fatal(err)
	}
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-facts", Model: "Facts", Width: 160, Height: 320})); err != nil {
		t.Fatal(err)
	}
	sys.startAgentWith("pc-a", agentSetup{tweak: func(o *agent.Options) {
		o.Phones = agent.InventoryPhones(inv, "", capture.OpLogOptions{})
	}})
	manifest := func(serial string) map[string]any {
		t.Helper()
		job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{
			Device: protocol.DeviceSelector{Serial: serial},
			Steps:  []protocol.Step{{Op: protocol.OpKey, Key: "KEYCODE_HOME"}}}})
		if err != nil {
			t.Fatal(err)
		}
		done := sys.waitJob(job.ID, func(j jobstore.Job) bool {
			return j.Status != jobstore.StatusQueued && j.Status != jobstore.StatusInProgress
		}, "completion")
		if done.Status != jobstore.StatusSucceeded {
			t.Fatalf("job status %s (%s)", done.Status, done.FailReason)
		}
		obj, err := sys.mio.Client(t).GetObject(sys.ctx, sys.mio.Bucket, "jobs/"+job.ID+"/g1/"+agent.ManifestName, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		var m map[string]any
		if err := json.NewDecoder(obj).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := manifest("sim-plain")
	if v, ok := m["facts_start"]; !ok || v != nil || m["facts_end"] != nil {
		t.Errorf("facts of a phone without facts: start %v (present %v), end %v; want null", v, ok, m["facts_end"])
	}
	if m["serial"] != "sim-plain" || m["model"] != "Plain" || m["agent_version"] != "dev" {
		t.Errorf("manifest = %v", m)
	}
	m = manifest("sim-facts")
	for _, k := range []string{"facts_start", "facts_end"} {
		f, ok := m[k].(map[string]any)
		if !ok || f["sdk"] == nil || f["screen_width"] == nil {
			t.Errorf("%s = %v, want the simulated phone's facts", k, m[k])
		}
	}
}
