package capture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

type wantArt struct{ name, ct string }

func TestRunnerSteps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		steps    []protocol.Step
		wantArts []wantArt      // artifacts of all steps, in order
		wantOps  []SimCall      // device history (Err ignored)
		wantErr  map[int]string // step index → error substring
	}{
		{
			name: "input steps",
			steps: []protocol.Step{
				{Op: protocol.OpLaunch, Package: "com.example"},
				{Op: protocol.OpTap, X: 10, Y: 20},
				{Op: protocol.OpTap, X: 5, Y: 6, DurationMS: 3},
				{Op: protocol.OpSwipe, X: 1, Y: 2, X2: 3, Y2: 4, DurationMS: 2},
				{Op: protocol.OpText, Text: "hi"},
				{Op: protocol.OpKey, Key: "KEYCODE_ENTER"},
				{Op: protocol.OpWait, DurationMS: 1},
			},
			wantOps: []SimCall{
				{Op: protocol.OpLaunch, Package: "com.example"},
				{Op: protocol.OpTap, X: 10, Y: 20},
				{Op: protocol.OpSwipe, X: 5, Y: 6, X2: 5, Y2: 6, Duration: 3 * time.Millisecond},
				{Op: protocol.OpSwipe, X: 1, Y: 2, X2: 3, Y2: 4, Duration: 2 * time.Millisecond},
				{Op: protocol.OpText, Text: "hi"},
				{Op: protocol.OpKey, Key: "KEYCODE_ENTER"},
			},
		},
		{
			name: "captures with default and given names",
			steps: []protocol.Step{
				{Op: protocol.OpScreenshot},
				{Op: protocol.OpScreenshot, Name: "home"},
				{Op: protocol.OpScreenshot, Name: "after.png"},
				{Op: protocol.OpUIDump},
				{Op: protocol.OpUIDump, Name: "tree"},
				{Op: protocol.OpRecordStart, Name: "session"},
				{Op: protocol.OpTap, X: 1, Y: 1},
				{Op: protocol.OpRecordStop},
				{Op: protocol.OpRecordStart},
				{Op: protocol.OpRecordStop, Name: "second.mp4"},
				{Op: protocol.OpRecordStart},
				{Op: protocol.OpRecordStop},
			},
			wantArts: []wantArt{
				{"screenshot-001.png", ContentTypePNG},
				{"home.png", ContentTypePNG},
				{"after.png", ContentTypePNG},
				{"ui_dump-004.xml", ContentTypeXML},
				{"tree.xml", ContentTypeXML},
				{"session.mp4", ContentTypeMP4},
				{"second.mp4", ContentTypeMP4},
				{"recording-011.mp4", ContentTypeMP4}, // the record_start's number
			},
		},
		{
			name: "bad steps",
			steps: []protocol.Step{
				{Op: protocol.OpScreenshot, Name: "a"},
				{Op: protocol.OpScreenshot, Name: "a.png"},
				{Op: protocol.OpUIDump, Name: strings.Repeat("n", 197)},
				{Op: protocol.OpScreenshot, Name: "../x"},
				{Op: protocol.OpRecordStop},
				{Op: protocol.OpKey},
				{Op: protocol.OpText},
				{Op: protocol.OpLaunch},
				{Op: protocol.OpTap, X: -1},
				{Op: protocol.OpWait, DurationMS: -5},
				{Op: "dance"},
				{Op: protocol.OpRecordStart},
				{Op: protocol.OpRecordStart},
			},
			wantArts: []wantArt{{"a.png", ContentTypePNG}},
			wantErr: map[int]string{
				1:  `artifact name "a.png" already used`,
				2:  `invalid artifact name`,
				3:  `invalid artifact name`,
				4:  `no recording is running`,
				5:  `invalid step: key: key step needs non-empty key`,
				6:  `invalid step: text: text step needs non-empty text`,
				7:  `invalid step: package: launch needs package`,
				8:  `invalid step: x: coordinate -1 is negative`,
				9:  `invalid step: duration_ms: -5 is negative`,
				10: `invalid step: op: unknown op "dance"`,
				12: `a recording is already running`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sim := NewSimulated(SimOptions{Serial: "r1", RecordingSize: 1000})
			r := NewRunner(ctx, sim, RunnerOptions{})
			defer r.Close()
			var arts []Artifact
			for i, s := range tc.steps {
				out, err := r.RunStep(ctx, s)
				if out.Seq != i+1 || out.Op != s.Op {
					t.Fatalf("step %d: outcome %+v", i, out)
				}
				if want, ok := tc.wantErr[i]; ok {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("step %d: err = %v, want %q", i, err, want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				arts = append(arts, out.Artifacts...)
			}
			if len(arts) != len(tc.wantArts) {
				t.Fatalf("got %d artifacts, want %d", len(arts), len(tc.wantArts))
			}
			for i, a := range arts {
				w := tc.wantArts[i]
				if a.Name != w.name || a.ContentType != w.ct {
					t.Errorf("artifact %d = %s (%s), want %s (%s)", i, a.Name, a.ContentType, w.name, w.ct)
				}
				sum := sha256.Sum256(a.Data)
				if a.Size != int64(len(a.Data)) || a.Size == 0 || a.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("artifact %s: size %d sha %s do not match its data", a.Name, a.Size, a.SHA256)
				}
			}
			if tc.wantOps != nil {
				h := sim.History()
				if len(h) != len(tc.wantOps) {
					t.Fatalf("history %+v", h)
				}
				for i := range h {
					h[i].Err = nil
					if h[i] != tc.wantOps[i] {
						t.Errorf("op %d = %+v, want %+v", i, h[i], tc.wantOps[i])
					}
				}
			}
		})
	}
}

// TestRunnerRefusesWhatProtocolRefuses: a step protocol.Step.Validate
// refuses fails in the runner with ErrInvalidStep and the same message the
// coordinator gives at submit and the agent at assign (the field, then
// what is wrong), reaches no phone, not even for the screenshot before it,
// and is written to the operation log as an error.
func TestRunnerRefusesWhatProtocolRefuses(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulated(SimOptions{Serial: "v1"})
	log := NewOpLog(OpLogOptions{})
	r := NewRunner(ctx, sim, RunnerOptions{BeforeAfter: true, OpLog: log})
	defer r.Close()
	for _, s := range []protocol.Step{
		{},
		{Op: "dance"},
		{Op: protocol.OpLaunch},
		{Op: protocol.OpTap, X: 3, Y: -1},
		{Op: protocol.OpSwipe, X: 1, Y: 1, X2: -2},
		{Op: protocol.OpWait, DurationMS: -1},
		{Op: protocol.OpText},
		{Op: protocol.OpText, Text: "a\tb"},
		{Op: protocol.OpKey},
		{Op: protocol.OpOpenURL, URL: "no scheme"},
		{Op: protocol.OpForceStop},
		{Op: protocol.OpClearData},
		{Op: protocol.OpRotate, Orientation: "sideways"},
		{Op: protocol.OpScreenshot, Name: "../x"},
		{Op: protocol.OpScreenshot, Effect: &protocol.EffectSpec{Key: "k"}},
		{Op: protocol.OpTap, Effect: &protocol.EffectSpec{Key: protocol.ReservedKeyPrefix + "x"}},
	} {
		want := s.Validate()
		if want == nil {
			t.Fatalf("protocol accepts %+v", s)
		}
		_, err := r.RunStep(ctx, s)
		if !errors.Is(err, ErrInvalidStep) || !strings.Contains(err.Error(), "invalid step: "+want.Error()) {
			t.Errorf("%+v: runner error %v, want ErrInvalidStep with %q", s, err, want)
		}
	}
	if h := sim.History(); len(h) != 0 {
		t.Errorf("the phone was asked %+v for refused steps", h)
	}
	if n, lines := log.Len(), bytes.Count(log.Bytes(), []byte(`"outcome":"error"`)); n != 16 || lines != 16 {
		t.Errorf("operation log: %d lines, %d errors; want 16 of each", n, lines)
	}
}

func TestRunnerDeviceErrors(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulated(SimOptions{Serial: "e1"})
	r := NewRunner(ctx, sim, RunnerOptions{})
	defer r.Close()
	boom := errors.New("boom")
	sim.FailNext(protocol.OpScreenshot, boom)
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpScreenshot, Name: "x"}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	// The name of a failed capture can be used again.
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpScreenshot, Name: "x"}); err != nil {
		t.Fatal(err)
	}
	sim.Unplug()
	_, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpTap})
	if !errors.Is(err, ErrUnplugged) || !strings.Contains(err.Error(), "e1") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunnerStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		step protocol.Step
		stop func(cancel context.CancelCauseFunc, r *Runner)
		want error
	}{
		{"revoke during wait", protocol.Step{Op: protocol.OpWait, DurationMS: 60_000},
			func(cancel context.CancelCauseFunc, _ *Runner) { cancel(fencing.ErrRevoked) }, fencing.ErrRevoked},
		{"stale during slow tap", protocol.Step{Op: protocol.OpTap, X: 1, Y: 1},
			func(cancel context.CancelCauseFunc, _ *Runner) { cancel(fencing.ErrStale) }, fencing.ErrStale},
		{"self-fence during screenshot", protocol.Step{Op: protocol.OpScreenshot},
			func(cancel context.CancelCauseFunc, _ *Runner) { cancel(fencing.ErrLeaseExpired) }, fencing.ErrLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := NewSimulated(SimOptions{Latency: time.Minute})
			sim.SetLatency(protocol.OpRecordStart, 0)
			job, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			r := NewRunner(job, sim, RunnerOptions{})
			if _, err := r.RunStep(job, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { _, err := r.RunStep(job, tc.step); errc <- err }()
			time.Sleep(50 * time.Millisecond) // let the step begin
			start := time.Now()
			tc.stop(cancel, r)
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) || !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("step did not stop")
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("stop took %v", d)
			}
			if sim.RecordingActive() {
				t.Fatal("recording still running after the job context ended")
			}
			if _, err := r.RunStep(job, protocol.Step{Op: protocol.OpTap}); !errors.Is(err, ErrClosed) {
				t.Fatalf("step after stop: %v", err)
			}
			for _, c := range sim.History() {
				if c.Op != protocol.OpRecordStart && c.Op != SimOpRecordAbort && c.Err == nil {
					t.Fatalf("op %s took effect", c.Op)
				}
			}
		})
	}
}

func TestRunnerCloseAbortsRecording(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulated(SimOptions{})
	r := NewRunner(ctx, sim, RunnerOptions{})
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if sim.RecordingActive() {
		t.Fatal("recording survived Close")
	}
	// Already-cancelled job context: the runner is closed from the start.
	done, cancel := context.WithCancel(ctx)
	cancel()
	r = NewRunner(done, sim, RunnerOptions{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpTap})
		if errors.Is(err, ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("runner on a done context never closed")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRunnerSpool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sim := NewSimulated(SimOptions{RecordingSize: 3 << 20})
	r := NewRunner(ctx, sim, RunnerOptions{SpoolDir: dir})
	defer r.Close()
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	out, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStop, Name: "clip"})
	if err != nil {
		t.Fatal(err)
	}
	a := out.Artifacts[0]
	if a.Data != nil || filepath.Dir(a.Path) != dir || a.Name != "clip.mp4" {
		t.Fatalf("artifact %+v", a)
	}
	rc, err := a.Open()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != a.Size || hex.EncodeToString(sum[:]) != a.SHA256 || !bytes.Equal(b[4:8], []byte("ftyp")) {
		t.Fatalf("spooled file does not match the artifact")
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Path); !os.IsNotExist(err) {
		t.Fatalf("spool file left behind: %v", err)
	}

	// A failed stop leaves no spool file and no recording.
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	sim.FailNext(protocol.OpRecordStop, errors.New("encoder died"))
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpRecordStop}); err == nil {
		t.Fatal("stop did not fail")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spool dir not empty: %v", ents)
	}
	if sim.RecordingActive() {
		t.Fatal("recording left running after a failed stop")
	}
}
