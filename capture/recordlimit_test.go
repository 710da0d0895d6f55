package capture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// checkCutAtLimit runs record_start, waits until the phone ended the
// recording on its own (ended), then record_stop, and checks that the
// recording is kept and reported cut at the limit (no chaining: one segment
// at most): in the op log entry of
// record_stop and in one log line carrying the job's fields.
func checkCutAtLimit(t *testing.T, dev capture.Device, ended func() bool, wantSize int64) {
	t.Helper()
	var logs syncBuffer
	job := zerolog.New(&logs).With().Str("job_id", "job-cut").Int64("generation", 3).Logger().WithContext(context.Background())
	oplog := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(job, dev, capture.RunnerOptions{OpLog: oplog, SpoolDir: t.TempDir(), RecordSegments: 1})
	defer r.Close()
	if _, err := r.RunStep(job, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the phone to end the recording at its time limit", ended)
	out, err := r.RunStep(job, protocol.Step{Op: protocol.OpRecordStop, Name: "screen"})
	if err != nil {
		t.Fatalf("record_stop after the limit: %v", err)
	}
	if len(out.Artifacts) != 1 || out.Artifacts[0].Name != "screen.mp4" || out.Artifacts[0].Size != wantSize {
		t.Fatalf("record_stop artifacts = %+v, want screen.mp4 of %d bytes", out.Artifacts, wantSize)
	}
	_ = out.Artifacts[0].Remove()

	lines := strings.Split(strings.TrimSpace(string(oplog.Bytes())), "\n")
	var stop map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &stop); err != nil {
		t.Fatal(err)
	}
	warning, _ := stop["warning"].(string)
	if stop["op"] != protocol.OpRecordStop || stop["outcome"] != capture.OutcomeOK || !strings.Contains(warning, "cut at the phone's time limit of 1s") {
		t.Errorf("op log entry of record_stop = %s; want outcome ok with a warning that the recording was cut at the 1s limit", lines[len(lines)-1])
	}
	var cut []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "time limit") {
			cut = append(cut, l)
		}
	}
	if len(cut) != 1 || !strings.Contains(cut[0], `"job_id":"job-cut"`) || !strings.Contains(cut[0], `"generation":3`) ||
		!strings.Contains(cut[0], `"op":"record_stop"`) || !strings.Contains(cut[0], `"level":"warn"`) {
		t.Errorf("log lines about the cut = %q, want one warning with the job's fields", cut)
	}
}

// TestADBRecordingCutAtLimit: screenrecord on the phone (through the real
// adb server) ends on its own at its --time-limit before record_stop; the
// file is still pulled, and the step says the recording was cut.
func TestADBRecordingCutAtLimit(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{RecordingSize: 64 << 10})
	p := l.phones[0]
	opts := l.options()
	opts.RecordLimit = time.Second
	dev, err := capture.NewADBDevice(context.Background(), opts, p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	checkCutAtLimit(t, dev, func() bool { return len(p.Processes()) == 0 }, 64<<10)
	if sig := p.Signals(); len(sig) != 0 {
		t.Errorf("signals on the phone = %q, want none: the recording had ended", sig)
	}
	testenv.Eventually(t, 10*time.Second, "the recording's file to be deleted from the phone", func() bool { return len(p.Files()) == 0 })
}

// TestSimulatedRecordingCutAtLimit: the simulated phone ends a recording at
// its time limit as a real one does.
func TestSimulatedRecordingCutAtLimit(t *testing.T) {
	s := capture.NewSimulated(capture.SimOptions{RecordLimit: time.Second, RecordingSize: 4096})
	checkCutAtLimit(t, s, func() bool { return !s.RecordingActive() }, 4096+40)
}
