package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

func TestOpLogParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts OpLogOptions
		step protocol.Step
		want map[string]any
	}{
		{"launch", OpLogOptions{}, protocol.Step{Op: protocol.OpLaunch, Package: "p", X: 9}, map[string]any{"package": "p"}},
		{"wait", OpLogOptions{}, protocol.Step{Op: protocol.OpWait, DurationMS: 5}, map[string]any{"duration_ms": int64(5)}},
		{"tap", OpLogOptions{}, protocol.Step{Op: protocol.OpTap, X: 1, Y: 2, Text: "x"}, map[string]any{"x": 1, "y": 2}},
		{"long press", OpLogOptions{}, protocol.Step{Op: protocol.OpTap, X: 1, Y: 2, DurationMS: 800}, map[string]any{"x": 1, "y": 2, "duration_ms": int64(800)}},
		{"swipe", OpLogOptions{}, protocol.Step{Op: protocol.OpSwipe, X: 1, Y: 2, X2: 3, Y2: 4}, map[string]any{"x": 1, "y": 2, "x2": 3, "y2": 4, "duration_ms": int64(0)}},
		{"text redacted", OpLogOptions{}, protocol.Step{Op: protocol.OpText, Text: "pässword"}, map[string]any{"text_len": 8}},
		{"text included", OpLogOptions{IncludeText: true}, protocol.Step{Op: protocol.OpText, Text: "pässword"}, map[string]any{"text_len": 8, "text": "pässword"}},
		{"key", OpLogOptions{}, protocol.Step{Op: protocol.OpKey, Key: "KEYCODE_BACK"}, map[string]any{"key": "KEYCODE_BACK"}},
		{"named capture", OpLogOptions{}, protocol.Step{Op: protocol.OpScreenshot, Name: "home"}, map[string]any{"name": "home"}},
		{"capture", OpLogOptions{}, protocol.Step{Op: protocol.OpUIDump}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewOpLog(tc.opts).Params(tc.step); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("params = %#v, want %#v", got, tc.want)
			}
		})
	}
}

type logLine struct {
	Time       string         `json:"time"`
	Seq        int            `json:"seq"`
	Serial     string         `json:"serial"`
	Op         string         `json:"op"`
	Params     map[string]any `json:"params"`
	DurationMS float64        `json:"duration_ms"`
	Outcome    string         `json:"outcome"`
	Error      string         `json:"error"`
	Artifacts  []OpArtifact   `json:"artifacts"`
}

func TestOpLogFromRunner(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulated(SimOptions{Serial: "log-1"})
	sim.SetLatency(protocol.OpTap, 2*time.Millisecond)
	sim.FailNext(protocol.OpKey, errors.New("input service crashed"))
	log := NewOpLog(OpLogOptions{})
	r := NewRunner(ctx, sim, RunnerOptions{OpLog: log})
	defer r.Close()
	steps := []protocol.Step{
		{Op: protocol.OpTap, X: 3, Y: 4},
		{Op: protocol.OpText, Text: "hunter2"},
		{Op: protocol.OpKey, Key: "KEYCODE_ENTER"},
		{Op: protocol.OpScreenshot, Name: "done"},
	}
	var outs []StepOutcome
	for _, s := range steps {
		out, _ := r.RunStep(ctx, s)
		outs = append(outs, out)
	}
	if log.Len() != len(steps) {
		t.Fatalf("len = %d", log.Len())
	}
	a := log.Artifact()
	if a.Name != OpLogName || a.ContentType != ContentTypeNDJSON || a.Size != int64(len(a.Data)) || a.SHA256 == "" {
		t.Fatalf("artifact = %s %s %d", a.Name, a.ContentType, a.Size)
	}
	if bytes.Contains(a.Data, []byte("hunter2")) {
		t.Fatal("typed text leaked into the operation log")
	}
	sc := bufio.NewScanner(bytes.NewReader(a.Data))
	var lines []logLine
	for sc.Scan() {
		var l logLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != len(steps) {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		ts, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil || !strings.HasSuffix(l.Time, "Z") || !ts.Equal(outs[i].Start) {
			t.Errorf("line %d: time %q (%v), want %v in UTC", i, l.Time, err, outs[i].Start)
		}
		if l.Seq != i+1 || l.Op != steps[i].Op || l.Serial != "log-1" {
			t.Errorf("line %d: %+v", i, l)
		}
	}
	if lines[0].DurationMS < 2 || lines[0].Outcome != OutcomeOK || lines[0].Params["x"] != 3.0 {
		t.Errorf("tap line: %+v", lines[0])
	}
	if lines[1].Params["text_len"] != 7.0 {
		t.Errorf("text line: %+v", lines[1])
	}
	if lines[2].Outcome != OutcomeError || !strings.Contains(lines[2].Error, "input service crashed") {
		t.Errorf("key line: %+v", lines[2])
	}
	want := []OpArtifact{{Name: "done.png", ContentType: ContentTypePNG, Size: outs[3].Artifacts[0].Size, SHA256: outs[3].Artifacts[0].SHA256}}
	if !reflect.DeepEqual(lines[3].Artifacts, want) {
		t.Errorf("screenshot artifacts = %+v, want %+v", lines[3].Artifacts, want)
	}
}

func TestOpLogAppend(t *testing.T) {
	log := NewOpLog(OpLogOptions{})
	if a := log.Artifact(); a.Size != 0 || a.Name != OpLogName {
		t.Fatalf("empty log artifact %+v", a)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	if err := log.Append(OpEntry{Time: at, Seq: 1, Op: "tap", DurationMS: 1.5, Outcome: OutcomeOK}); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-03-01T11:00:00.123456789Z","seq":1,"op":"tap","duration_ms":1.5,"outcome":"ok"}` + "\n"
	if got := string(log.Bytes()); got != want {
		t.Fatalf("line = %s want %s", got, want)
	}
}
