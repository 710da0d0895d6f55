package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// goldenStatus is a status document with a job of each kind, a stop and an
// error, its times relative to statusNow.
func goldenStatus() protocol.AgentStatus {
	now := statusNow
	owner := "pc-gold/16a0792989be9be3"
	return protocol.AgentStatus{
		AgentID: "pc-gold", BootID: "16a0792989be9be3", Owner: owner, Version: "v1.2.3",
		Started: now.Add(-90 * time.Minute), State: "running", Slots: 3, Free: 1,
		Settings: map[string]string{"log_level": "debug", "concurrency": "3"},
		Connection: protocol.AgentConnection{
			NATSConnected: true, Server: "nats://nats.example.com:4222", HelloAccepted: true, CoordinatorID: "vps-1",
			LastHello: now.Add(-212 * time.Millisecond), LastHeartbeat: now.Add(-11 * time.Millisecond), LeaseTTLMS: 30000, ClockOffsetMS: 24,
		},
		Jobs: []protocol.AgentJob{
			{Token: fencing.Token{JobID: "checkout-eu-1", Owner: owner, Generation: 3}, Started: now.Add(-2 * time.Second),
				Step: 2, Steps: 5, Current: "step 3 (tap)", Phone: "R58M123ABC", Leased: true, LeaseLeftMS: 27500},
			{Token: fencing.Token{JobID: "explore-7", Owner: owner, Generation: 1}, Started: now.Add(-500 * time.Millisecond),
				Step: 0, Steps: 0, Interactive: true, Phone: "sim-1", LeaseLeftMS: 30000},
		},
		Phones: []protocol.AgentPhone{
			{Device: protocol.Device{Serial: "R58M123ABC", State: "device", Model: "SM-G991B", Tags: []string{"eu", "shop"}}, Busy: true},
			{Device: protocol.Device{Serial: "sim-1", State: "device", Model: "SimPhone"}, Busy: true},
			{Device: protocol.Device{Serial: "0A1B2C", State: "unauthorized"}},
			{Device: protocol.Device{Serial: "HOT99", State: protocol.DeviceResting, Model: "Pixel 7",
				Reason: "battery 47.5 °C over the 45 °C limit (offered again at 40 °C)", Facts: &protocol.PhoneFacts{
					AndroidVersion: "13", SDK: 33, ScreenWidth: 1080, ScreenHeight: 2400, Density: 420,
					BatteryLevel: new(81), BatteryTempC: new(47.5), Charging: new(true), BatteryHealth: "good",
					ScreenOn: new(true), Locked: new(false), FreeStorageMB: new(int64(20480)),
				}}},
		},
		Stops: []protocol.AgentStop{
			{Token: fencing.Token{JobID: "old-job", Owner: owner, Generation: 2}, Cause: "revoked: reassigned", At: now.Add(-3 * time.Minute), CutShort: "upload home.png"},
		},
		Errors: []protocol.AgentError{
			{At: now.Add(-42 * time.Second), What: "upload", Error: "put jobs/old-job/g2/home.png: connection reset", JobID: "old-job"},
		},
	}
}

var statusNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// TestStatusGolden renders a status document served by a stand-in status
// endpoint with edgeagent status and compares it with
// testdata/status.golden (go test -update rewrites it); --json prints the
// document as served.
func TestStatusGolden(t *testing.T) {
	doc, err := json.Marshal(goldenStatus())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	status := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		a := newApp(&out, &errOut, nil)
		a.now = func() time.Time { return statusNow }
		code := exitCode(a.run(t.Context(), append([]string{"status", "--addr", addr}, args...)))
		return code, out.String(), errOut.String()
	}
	code, stdout, stderr := status()
	if code != 0 || stderr != "" {
		t.Fatalf("status: exit %d, stderr %q", code, stderr)
	}
	testenv.Golden(t, "status.golden", stdout)

	code, stdout, _ = status("--json")
	if code != 0 || stdout != string(doc) {
		t.Fatalf("status --json: exit %d\n%s", code, stdout)
	}

	srv.Close()
	code, stdout, stderr = status()
	if code != 1 || stdout != "" || !strings.Contains(stderr, "edgeagent: cannot read the agent's status at "+addr) {
		t.Fatalf("status without an agent: exit %d, %q, %q", code, stdout, stderr)
	}
}
