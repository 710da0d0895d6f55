package agent

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestManifestADB: on a phone reached through the real adb server (the
// fake phone), the job's manifest has the phone's facts at start and end,
// its model and the adb server's version, and the logcat the task asks for
// holds the job's lines.
func TestManifestADB(t *testing.T) {
	adb := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 7"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	adb.Connect(t, phone.Addr(), "device")
	ctx := context.Background()
	inv, stop, err := capture.NewADBInventory(ctx, capture.ADBOptions{Address: adb.Addr, ADBPath: adb.Path, Serials: []string{phone.Serial()}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testenv.Eventually(t, 20*time.Second, "the phone to be listed as ready", func() bool {
		for _, d := range inv.Devices() {
			if d.Serial == phone.Serial() && d.State == protocol.DeviceReady {
				return true
			}
		}
		return false
	})
	p, release, err := InventoryPhones(inv, t.TempDir(), capture.OpLogOptions{}).Acquire(ctx, protocol.DeviceSelector{Serial: phone.Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	phone.Log("Before", "not the job's")
	j := &job{a: &Agent{opts: Options{AgentID: "pc-1", Version: "9.9.9"}}, log: zerolog.Nop(), work: ctx,
		tok:  fencing.Token{JobID: "job-1", Owner: "pc-1/boot", Generation: 2},
		task: protocol.Task{Logcat: true, Capture: protocol.CaptureBeforeAfter}}
	if err := j.startCapture(p); err != nil {
		t.Fatal(err)
	}
	arts, err := p.RunStep(ctx, protocol.Step{Op: protocol.OpTap, X: 7, Y: 8})
	if err != nil || len(arts) != 2 {
		t.Fatalf("tap with before/after: %v, %d artifacts", err, len(arts))
	}
	lc, err := p.(capturePhone).Logcat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lcBytes(lc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b, "tap at 7,8") || strings.Contains(b, "Before:") {
		t.Errorf("logcat:\n%s", b)
	}
	a := j.manifest(p)
	var m JobManifest
	if err := json.Unmarshal(a.Data, &m); err != nil {
		t.Fatal(err)
	}
	if m.FactsStart == nil || m.FactsEnd == nil || m.FactsStart.SDK == 0 || m.FactsStart.ScreenWidth == 0 {
		t.Errorf("manifest facts start %+v end %+v, want the fake phone's", m.FactsStart, m.FactsEnd)
	}
	if !strings.HasPrefix(m.ADBVersion, "1.0.") || m.Model != "Pixel 7" || m.Serial != phone.Serial() || m.AgentVersion != "9.9.9" ||
		m.Generation != 2 || !m.Logcat || m.Capture != protocol.CaptureBeforeAfter {
		t.Errorf("manifest = %+v", m)
	}
	for _, x := range append(arts, lc) {
		_ = x.Remove()
	}
}

func lcBytes(a capture.Artifact) (string, error) {
	rc, err := a.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}
