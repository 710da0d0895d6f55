package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

var portRe = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// normalizeDoctor replaces what changes from run to run: the temporary
// directory and loopback ports.
func normalizeDoctor(out, tmp string) string {
	out = strings.ReplaceAll(out, tmp, "<tmp>")
	return portRe.ReplaceAllString(out, "127.0.0.1:<port>")
}

// TestDoctorGolden runs doctor in-process against a setup broken in many
// ways at once (NATS up without a coordinator, storage refusing the key,
// phones unauthorized, offline, without permissions or not attached, the
// status port taken) and compares its checklist with
// testdata/doctor_broken.golden.
func TestDoctorGolden(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>wrong secret</Message></Error>`)
	}))
	t.Cleanup(s3.Close)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	adbAddr := fakeADBServer(t,
		"R58M123ABC             unauthorized usb:1-1 transport_id:3",
		"emulator-5554          device product:sdk_gphone64 model:Pixel_7 device:emu64 transport_id:4",
		"9B8C7D6E               no permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html] usb:1-2 transport_id:5",
		"0F0F0F0F               offline usb:1-3 transport_id:6",
		"FFFF0000               device product:x model:Other device:y transport_id:7")
	orig := diskFreeOf
	diskFreeOf = func(string) (uint64, error) { return 20 << 30, nil }
	t.Cleanup(func() { diskFreeOf = orig })

	tmp := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`agent_id: pc-gold
state_dir: %s/state
nats:
  url: %s
storage:
  endpoint: %s
  bucket: edge-artifacts
  access_key: edge
  secret_key: wrong-secret
  secure: false
adb:
  address: %s
  path: /nonexistent/adb
devices:
  - serial: R58M123ABC
  - serial: emulator-5554
  - serial: 9B8C7D6E
  - serial: 0F0F0F0F
  - serial: 0A1B2C3D
  - serial: sim-1
    simulated: true
status:
  listen: %s
`, tmp, ns.ClientURL(), strings.TrimPrefix(s3.URL, "http://"), adbAddr, busy.Addr()))
	code, out, errOut := runCLI(t, "doctor", "-c", cfg, "-timeout", "3s")
	if code != 1 {
		t.Errorf("doctor: exit %d, want 1; stderr %s", code, errOut)
	}
	out = strings.ReplaceAll(out, filepath.Dir(cfg), "<config dir>")
	testenv.Golden(t, "doctor_broken.golden", normalizeDoctor(out, tmp))
}
