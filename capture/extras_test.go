package capture_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// artBytes reads an artifact's bytes, from memory or its spool file.
func artBytes(t testing.TB, a capture.Artifact) []byte {
	t.Helper()
	rc, err := a.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkHashed checks that a is a spool file under dir whose SHA-256 and size
// are those of its bytes.
func checkHashed(t *testing.T, a capture.Artifact, dir string) []byte {
	t.Helper()
	if a.Path == "" || a.Data != nil || !strings.HasPrefix(a.Path, dir+string(os.PathSeparator)) {
		t.Fatalf("artifact %s: path %q data %d bytes, want a spool file under %s", a.Name, a.Path, len(a.Data), dir)
	}
	b := artBytes(t, a)
	sum := sha256.Sum256(b)
	if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(b)) {
		t.Fatalf("artifact %s: sha256 %s size %d, its file hashes to %x, %d bytes", a.Name, a.SHA256, a.Size, sum, len(b))
	}
	return b
}

// oplogLines decodes an operation log.
func oplogLines(t *testing.T, l *capture.OpLog) []capture.OpEntry {
	t.Helper()
	var out []capture.OpEntry
	for _, line := range strings.Split(strings.TrimSpace(string(l.Bytes())), "\n") {
		var e capture.OpEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestADBBeforeAfter: with capture before_after, every input step through
// the real adb server gets a screenshot before and after it, named with the
// step's number, distinct (the tap changed the screen), listed in its op log
// line and spooled with their hash; other steps get none.
func TestADBBeforeAfter(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	ctx := context.Background()
	dev, err := capture.NewADBDevice(ctx, l.options(), l.phones[0].Serial())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{OpLog: log, SpoolDir: dir, BeforeAfter: true})
	defer r.Close()
	steps := []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.android.settings"},
		{Op: protocol.OpWait, DurationMS: 1},
		{Op: protocol.OpTap, X: 100, Y: 300},
		{Op: protocol.OpScreenshot},
	}
	var got [][]capture.Artifact
	for _, s := range steps {
		out, err := r.RunStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Artifacts)
	}
	names := func(as []capture.Artifact) []string {
		var n []string
		for _, a := range as {
			n = append(n, a.Name)
		}
		return n
	}
	want := [][]string{
		{"screenshot-001-1-before.png", "screenshot-001-2-after.png"},
		nil,
		{"screenshot-003-1-before.png", "screenshot-003-2-after.png"},
		{"screenshot-004.png"},
	}
	for i := range want {
		if g := names(got[i]); strings.Join(g, ",") != strings.Join(want[i], ",") {
			t.Errorf("step %d artifacts = %q, want %q", i+1, g, want[i])
		}
	}
	before, after := checkHashed(t, got[2][0], dir), checkHashed(t, got[2][1], dir)
	if bytes.Equal(before, after) {
		t.Error("the screenshots before and after the tap are the same")
	}
	entries := oplogLines(t, log)
	if len(entries) != 4 || len(entries[2].Artifacts) != 2 || entries[2].Artifacts[0].Name != "screenshot-003-1-before.png" ||
		entries[2].Artifacts[1].SHA256 != got[2][1].SHA256 || len(entries[1].Artifacts) != 0 {
		t.Errorf("op log = %s", log.Bytes())
	}
	for _, as := range got {
		for _, a := range as {
			_ = a.Remove()
		}
	}
}

// TestADBLogcatWindow: the logcat artifact holds the lines the phone logged
// between StartLogcat and Logcat, and none from before.
func TestADBLogcatWindow(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	p := l.phones[0]
	ctx := context.Background()
	dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	p.Log("Before", "line logged before the job")
	dir := t.TempDir()
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{SpoolDir: dir})
	defer r.Close()
	if err := r.StartLogcat(ctx); err != nil {
		t.Fatal(err)
	}
	// The mark is the phone's clock rounded up to the next millisecond
	// (logcat -T takes milliseconds; a line of the millisecond before the
	// job must not be in it). The fake phone's clock is this machine's:
	// the tap is made once that clock has passed the mark, as any step of
	// a real job is, more than a millisecond after the job starts.
	mark := time.Now().Truncate(time.Millisecond).Add(time.Millisecond)
	for !time.Now().After(mark) {
		runtime.Gosched()
	}
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpTap, X: 11, Y: 22}); err != nil {
		t.Fatal(err)
	}
	p.Log("During", "line logged during the job")
	a, err := r.Logcat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove()
	p.Log("After", "line logged after the job")
	b := string(checkHashed(t, a, dir))
	if a.Name != capture.LogcatName || a.ContentType != capture.ContentTypeText {
		t.Errorf("artifact %s %s", a.Name, a.ContentType)
	}
	if !strings.Contains(b, "During: line logged during the job") || !strings.Contains(b, "tap at 11,22") {
		t.Errorf("logcat misses the job's lines:\n%s", b)
	}
	if strings.Contains(b, "Before:") || strings.Contains(b, "After:") {
		t.Errorf("logcat has lines from outside the job's window:\n%s", b)
	}
	if !slicesContainsPrefix(p.Commands(), "logcat -d -v threadtime -T ") {
		t.Errorf("phone commands = %q, want logcat -d -T", p.Commands())
	}
}

func slicesContainsPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestSimulatedLogcatWindow: the simulated phone answers logcat the same way.
func TestSimulatedLogcatWindow(t *testing.T) {
	ctx := context.Background()
	s := capture.NewSimulated(capture.SimOptions{})
	s.Log("Before", "early")
	r := capture.NewRunner(ctx, s, capture.RunnerOptions{})
	defer r.Close()
	if err := r.StartLogcat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpKey, Key: "KEYCODE_BACK"}); err != nil {
		t.Fatal(err)
	}
	a, err := r.Logcat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := string(a.Data); !strings.Contains(b, "key KEYCODE_BACK") || strings.Contains(b, "early") {
		t.Errorf("simulated logcat:\n%s", b)
	}
}

// checkChained records for longer than the phone's (shortened) time limit
// and checks that record_stop returns the segments in order, named
// <name>-1.mp4, -2.mp4 …, and that the op log line says the recording was
// chained.
func checkChained(t *testing.T, dev capture.Device, segments func() int, limit string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{OpLog: log, SpoolDir: dir})
	defer r.Close()
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStart, Name: "long"}); err != nil {
		t.Fatal(err)
	}
	// A fourth start means the third segment had started (and ended).
	testenv.Eventually(t, 20*time.Second, "a fourth segment to be started after three ended at the limit", func() bool { return segments() >= 4 })
	out, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStop})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Artifacts) < 3 {
		t.Fatalf("record_stop artifacts = %+v, want at least 3 segments", out.Artifacts)
	}
	for i, a := range out.Artifacts {
		if want := "long-" + string(rune('1'+i)) + ".mp4"; a.Name != want || a.ContentType != capture.ContentTypeMP4 {
			t.Errorf("segment %d is %s, want %s", i+1, a.Name, want)
		}
		b := checkHashed(t, a, dir)
		if !bytes.Equal(b[4:8], []byte("ftyp")) {
			t.Errorf("segment %s is not an MP4", a.Name)
		}
		_ = a.Remove()
	}
	e := oplogLines(t, log)[1]
	if !strings.Contains(e.Warning, "chained at the phone's time limit of "+limit) || len(e.Artifacts) != len(out.Artifacts) ||
		strings.Contains(e.Warning, "cut at") {
		t.Errorf("op log line of record_stop: warning %q, %d artifacts", e.Warning, len(e.Artifacts))
	}
}

// TestADBRecordingChained: through the real adb server, screenrecord ends
// at its --time-limit (1 s here) and the next segment starts at once.
func TestADBRecordingChained(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{RecordingSize: 16 << 10})
	p := l.phones[0]
	opts := l.options()
	opts.RecordLimit = time.Second
	dev, err := capture.NewADBDevice(context.Background(), opts, p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	checkChained(t, dev, func() int {
		n := 0
		for _, c := range p.Commands() {
			if strings.Contains(c, "screenrecord --time-limit 1 ") {
				n++
			}
		}
		return n
	}, "1s")
	testenv.Eventually(t, 10*time.Second, "the segments' files to be deleted from the phone", func() bool { return len(p.Files()) == 0 })
	if n := len(p.Processes()); n != 0 {
		t.Errorf("%d processes left on the phone", n)
	}
}

// TestSimulatedRecordingChained: the simulated phone chains the same way.
func TestSimulatedRecordingChained(t *testing.T) {
	s := capture.NewSimulated(capture.SimOptions{RecordLimit: 200 * time.Millisecond, RecordingSize: 1024})
	checkChained(t, s, func() int {
		n := 0
		for _, c := range s.History() {
			if c.Op == protocol.OpRecordStart {
				n++
			}
		}
		return n
	}, "0.2s")
}

// TestRecordSegmentsBound: a recording with the most segments allowed is
// cut at the limit, and the op log says so.
func TestRecordSegmentsBound(t *testing.T) {
	ctx := context.Background()
	s := capture.NewSimulated(capture.SimOptions{RecordLimit: 100 * time.Millisecond, RecordingSize: 1024})
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(ctx, s, capture.RunnerOptions{OpLog: log, RecordSegments: 2})
	defer r.Close()
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the second segment to end", func() bool {
		n := 0
		for _, c := range s.History() {
			if c.Op == protocol.OpRecordStart {
				n++
			}
		}
		return n == 2 && !s.RecordingActive()
	})
	out, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStop})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Artifacts) != 2 || out.Artifacts[1].Name != "recording-001-2.mp4" {
		t.Fatalf("artifacts %+v", out.Artifacts)
	}
	if w := oplogLines(t, log)[1].Warning; !strings.Contains(w, "cut at the phone's time limit of 0.1s") || !strings.Contains(w, "most segments allowed, 2") {
		t.Errorf("warning %q", w)
	}
}

// TestADBChainedRecordingAborted: a job stopped while a chained recording
// runs leaves no screenrecord and no segment file on the phone.
func TestADBChainedRecordingAborted(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{RecordingSize: 4096})
	p := l.phones[0]
	opts := l.options()
	opts.RecordLimit = time.Second
	dev, err := capture.NewADBDevice(context.Background(), opts, p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	job, stop := context.WithCancel(context.Background())
	r := capture.NewRunner(job, dev, capture.RunnerOptions{SpoolDir: t.TempDir()})
	defer r.Close()
	if _, err := r.RunStep(job, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "a second segment to run", func() bool {
		n := 0
		for _, c := range p.Commands() {
			if strings.Contains(c, "screenrecord --time-limit 1 ") {
				n++
			}
		}
		return n >= 2 && len(p.Processes()) == 1
	})
	stop() // the job is revoked
	r.Close()
	testenv.Eventually(t, 10*time.Second, "no screenrecord and no file left on the phone", func() bool {
		return len(p.Processes()) == 0 && len(p.Files()) == 0
	})
}
