package fakeadbd_test

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startPhone(t *testing.T, opts fakeadbd.Options) *fakeadbd.Phone {
	t.Helper()
	p, err := fakeadbd.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestRealADBCommandLine drives the fake with the real adb command-line
// tool: the fake is only useful if real adb accepts it.
func TestRealADBCommandLine(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{Model: "Pixel 7"})
	srv.Connect(t, p.Addr(), "device")

	run := func(args ...string) string {
		t.Helper()
		out, err := srv.Run(append([]string{"-s", p.Serial()}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s%s", err, out, srv.LogTail())
		}
		return out
	}
	if got := strings.TrimSpace(run("shell", "getprop", "ro.product.model")); got != "Pixel 7" {
		t.Fatalf("getprop ro.product.model = %q", got)
	}
	// shell v2 carries the exit code.
	if out, err := srv.Run("-s", p.Serial(), "shell", "false"); err == nil {
		t.Fatalf("adb shell false succeeded: %s", out)
	}
	pngBytes := run("exec-out", "screencap", "-p")
	img, err := png.Decode(strings.NewReader(pngBytes))
	if err != nil {
		t.Fatalf("decode exec-out screencap -p: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 720 || b.Dy() != 1280 {
		t.Fatalf("screenshot size %v", b)
	}
	run("shell", "input", "tap", "100", "200")
	run("shell", "input", "text", "'a b%sc'")
	got := p.Inputs()
	if len(got) != 2 || got[0].String() != "tap 100 200" || got[1].String() != "text a b%sc" {
		t.Fatalf("inputs = %q", got)
	}
	// sync: push and pull through the adb CLI.
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	payload := bytes.Repeat([]byte("edgeagent"), 30000)
	if err := os.WriteFile(src, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	run("push", src, "/sdcard/x.bin")
	if b, ok := p.File("/sdcard/x.bin"); !ok || !bytes.Equal(b, payload) {
		t.Fatalf("pushed file: ok=%v len=%d", ok, len(b))
	}
	dst := filepath.Join(dir, "dst.bin")
	run("pull", "/sdcard/x.bin", dst)
	if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(b, payload) {
		t.Fatalf("pulled file: %v len=%d", err, len(b))
	}
}

func TestRealADBUnauthorized(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{Unauthorized: true})
	srv.Connect(t, p.Addr(), "unauthorized")
	if out, err := srv.Run("-s", p.Serial(), "shell", "true"); err == nil || !strings.Contains(out, "unauthorized") {
		t.Fatalf("shell on an unauthorized phone: err=%v out=%s", err, out)
	}
}

// TestRealADBPipeline: the fake phone's shell runs a pipeline as sh does,
// each stage reading what the one before wrote, with the last stage's exit
// status; grep -E keeps the matching lines (exit 1 when none match), and a
// quoted '|' is no pipe. `dumpsys package packages` lists the phone's
// configured apps with their versions among the system image's packages.
func TestRealADBPipeline(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{Packages: []string{"com.example.shop"},
		AppVersions: map[string]protocol.AppVersion{"com.example.shop": {VersionName: "5.2.1", VersionCode: 521}}})
	srv.Connect(t, p.Addr(), "device")
	shell := func(cmd string) (string, error) {
		return srv.Run("-s", p.Serial(), "shell", cmd)
	}
	if out, err := shell(`echo 'a|b'; echo c | grep -E '^(c|d)$'`); err != nil || out != "a|b\nc\n" {
		t.Errorf("pipeline: %q, %v", out, err)
	}
	if out, err := shell(`echo c | grep -v c`); err == nil || out != "" {
		t.Errorf("grep without a match: %q, %v; want exit 1", out, err)
	}
	out, err := shell(`dumpsys package packages | grep -E '^  Package \[|^    versionName='`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "  Package [com.example.shop] "; !strings.Contains(out, want) || !strings.Contains(out, "    versionName=5.2.1\n") || strings.Contains(out, "codePath=") {
		t.Errorf("packages filtered: %q", out)
	}
}
