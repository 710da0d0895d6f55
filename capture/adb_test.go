package capture_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// adbLab is a real adb server with fake phones connected to it.
type adbLab struct {
	srv    *testenv.ADBServer
	phones []*fakeadbd.Phone
}

// startADBLab starts an isolated adb server and one fake phone per option,
// each connected with `adb connect` and in the state it should reach.
func startADBLab(t *testing.T, opts ...fakeadbd.Options) *adbLab {
	t.Helper()
	l := &adbLab{srv: testenv.StartADB(t)}
	for _, o := range opts {
		p, err := fakeadbd.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
		want := "device"
		if o.Unauthorized {
			want = "unauthorized"
		}
		l.srv.Connect(t, p.Addr(), want)
		l.phones = append(l.phones, p)
	}
	return l
}

func (l *adbLab) options() capture.ADBOptions {
	return capture.ADBOptions{Address: l.srv.Addr, ADBPath: l.srv.Path}
}

// inventory opens the adb inventory and waits until every phone is listed
// in its final state.
func (l *adbLab) inventory(t *testing.T, opts capture.ADBOptions) *capture.Inventory {
	t.Helper()
	inv, stop, err := capture.NewADBInventory(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, p := range l.phones {
		want := protocol.DeviceReady
		if p.Unauthorized() {
			want = "unauthorized"
		}
		waitState(t, inv, p.Serial(), want)
	}
	return inv
}

func waitState(t *testing.T, inv *capture.Inventory, serial, state string) protocol.Device {
	t.Helper()
	var last []protocol.Device
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		last = inv.Devices()
		for _, d := range last {
			if d.Serial == serial && d.State == state {
				return d
			}
		}
		if state == "" && !slices.ContainsFunc(last, func(d protocol.Device) bool { return d.Serial == serial }) {
			return protocol.Device{}
		}
	}
	t.Fatalf("inventory never listed %s in state %q; last: %+v", serial, state, last)
	return protocol.Device{}
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode screenshot (%d bytes): %v", len(b), err)
	}
	return img
}

func inputs(p *fakeadbd.Phone) []string {
	var out []string
	for _, e := range p.Inputs() {
		out = append(out, e.String())
	}
	return out
}

// TestADBJob runs a job's steps on a fake phone through the real adb server:
// the inventory lists the phone with its model and tags, the screenshot is
// a PNG of the phone's screen, the UI dump is the hierarchy, taps and text
// reach the phone exactly as sent, and a recording is stopped, pulled and
// deleted from the phone.
func TestADBJob(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Model: "Pixel 7", RecordingSize: 300 << 10})
	p := l.phones[0]
	opts := l.options()
	opts.Tags = map[string][]string{p.Serial(): {"eu", "lab"}}
	inv := l.inventory(t, opts)

	got := inv.Devices()
	want := []protocol.Device{{Serial: p.Serial(), State: "device", Model: "Pixel 7", Tags: []string{"eu", "lab"}}}
	if len(got) != 1 || got[0].Serial != want[0].Serial || got[0].State != want[0].State || got[0].Model != want[0].Model || !slices.Equal(got[0].Tags, want[0].Tags) {
		t.Fatalf("inventory = %+v, want %+v", got, want)
	}

	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Model: "Pixel 7", Tags: []string{"eu"}})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{OpLog: log, SpoolDir: t.TempDir()})
	defer r.Close()

	text := `it's "me" & you; $HOME | 100%sure`
	steps := []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.android.settings"},
		{Op: protocol.OpScreenshot, Name: "before"},
		{Op: protocol.OpTap, X: 100, Y: 200},
		{Op: protocol.OpText, Text: text},
		{Op: protocol.OpTap, X: 300, Y: 400, DurationMS: 700},
		{Op: protocol.OpSwipe, X: 360, Y: 1000, X2: 360, Y2: 300, DurationMS: 250},
		{Op: protocol.OpKey, Key: "KEYCODE_ENTER"},
		{Op: protocol.OpUIDump, Name: "tree"},
		{Op: protocol.OpRecordStart},
		{Op: protocol.OpWait, DurationMS: 50},
		{Op: protocol.OpRecordStop, Name: "video"},
		{Op: protocol.OpKey, Key: "KEYCODE_BACK"},
		{Op: protocol.OpKey, Key: "KEYCODE_HOME"},
	}
	arts := map[string]capture.Artifact{}
	for _, s := range steps {
		out, err := r.RunStep(ctx, s)
		if err != nil {
			t.Fatalf("%v\n%s", err, l.srv.LogTail())
		}
		for _, a := range out.Artifacts {
			arts[a.Name] = a
		}
	}

	// Exactly the events sent, in order, as the phone's input command got
	// them after its shell removed the quoting.
	wantInputs := []string{
		"monkey -p com.android.settings -c android.intent.category.LAUNCHER 1",
		"tap 100 200",
		`text it's%s"me"%s&%syou;%s$HOME%s|%s100%`,
		"text sure",
		"swipe 300 400 300 400 700",
		"swipe 360 1000 360 300 250",
		"keyevent KEYCODE_ENTER",
		"keyevent KEYCODE_BACK",
		"keyevent KEYCODE_HOME",
	}
	if gotInputs := inputs(p); !slices.Equal(gotInputs, wantInputs) {
		t.Errorf("phone received\n%q\nwant\n%q", gotInputs, wantInputs)
	}
	if typed := p.Sim().Typed(); typed != "" { // cleared by HOME
		t.Errorf("typed after home = %q", typed)
	}

	shot := arts["before.png"]
	img := decodePNG(t, artBytes(t, shot))
	if b := img.Bounds(); b.Dx() != 720 || b.Dy() != 1280 {
		t.Errorf("screenshot is %v, want 720x1280", b)
	}
	if !slices.Contains(p.Services(), "exec:screencap") {
		t.Errorf("screenshot did not use raw screencap over exec:; services: %q", p.Services())
	}
	tree := arts["tree.xml"]
	tree.Data = artBytes(t, tree) // spooled: read it back
	if !bytes.HasPrefix(tree.Data, []byte("<?xml")) || !bytes.HasSuffix(tree.Data, []byte("</hierarchy>")) ||
		!bytes.Contains(tree.Data, []byte(`package="com.android.settings"`)) {
		t.Errorf("ui dump = %.300s", tree.Data)
	}
	if got := editText(t, tree.Data); got != text {
		t.Errorf("text field in the ui dump = %q, want %q", got, text)
	}

	video := arts["video.mp4"]
	if video.Size != 300<<10 || video.Path == "" || video.ContentType != capture.ContentTypeMP4 {
		t.Errorf("video artifact = %+v", video)
	}
	rc, err := video.Open()
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 8)
	_, _ = rc.Read(head)
	rc.Close()
	_ = video.Remove()
	if string(head[4:8]) != "ftyp" {
		t.Errorf("video starts with %q, want an ftyp box", head)
	}
	if sig := p.Signals(); !slices.Equal(sig, []string{"INT screenrecord"}) {
		t.Errorf("signals on the phone = %q, want one SIGINT to screenrecord", sig)
	}
	if procs, files := p.Processes(), p.Files(); len(procs) != 0 || len(files) != 0 {
		t.Errorf("left on the phone: processes %q, files %q", procs, files)
	}
	if log.Len() != len(steps) {
		t.Errorf("oplog has %d entries, want %d", log.Len(), len(steps))
	}
	if strings.Contains(string(log.Bytes()), "HOME") && strings.Contains(string(log.Bytes()), "$HOME") {
		t.Error("oplog contains the typed text")
	}
}

// TestADBScreenshotPaths covers the raw formats and headers, the fallback
// to screencap -p, and a screenshot of more than 1 MiB on each path.
func TestADBScreenshotPaths(t *testing.T) {
	cases := []struct {
		name    string
		opts    fakeadbd.Options
		service string // the exec service that must have produced the shot
		exact   bool   // pixels must equal the phone's frame
		minSize int
	}{
		{name: "raw RGBA_8888 16-byte header", opts: fakeadbd.Options{Width: 240, Height: 400}, service: "exec:screencap", exact: true},
		{name: "raw RGBX_8888", opts: fakeadbd.Options{Width: 240, Height: 400, ScreencapFormat: 2}, service: "exec:screencap", exact: true},
		{name: "raw RGB_565 12-byte header", opts: fakeadbd.Options{Width: 240, Height: 400, ScreencapFormat: 4, LegacyHeader: true}, service: "exec:screencap"},
		{name: "raw over 1 MiB", opts: fakeadbd.Options{Width: 480, Height: 800, Noise: true}, service: "exec:screencap", exact: true, minSize: 1 << 20},
		{name: "fallback to PNG over 1 MiB", opts: fakeadbd.Options{Width: 480, Height: 800, Noise: true, BrokenRaw: true}, service: "exec:screencap -p", exact: true, minSize: 1 << 20},
	}
	var opts []fakeadbd.Options
	for _, c := range cases {
		opts = append(opts, c.opts)
	}
	l := startADBLab(t, opts...)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := l.phones[i]
			opts := l.options()
			opts.ScreenshotMode = capture.ScreenshotRaw
			dev, err := capture.NewADBDevice(context.Background(), opts, p.Serial())
			if err != nil {
				t.Fatal(err)
			}
			shots := 1
			if c.opts.BrokenRaw {
				shots = 2 // the second must not try raw again
			}
			for shot := range shots {
				b, err := dev.Screenshot(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(b) < c.minSize {
					t.Errorf("screenshot is %d bytes, want at least %d", len(b), c.minSize)
				}
				t.Logf("shot %d: %d-byte PNG", shot, len(b))
				img := decodePNG(t, b)
				frame := p.LastFrame()
				if img.Bounds() != frame.Rect {
					t.Fatalf("screenshot %v, phone screen %v", img.Bounds(), frame.Rect)
				}
				diff := maxDiff(img, frame)
				if c.exact && diff != 0 || diff > 8 {
					t.Errorf("shot %d: pixels differ from the phone's screen by up to %d", shot, diff)
				}
			}
			svcs := p.Services()
			if last := svcs[len(svcs)-1]; last != c.service {
				t.Errorf("last screenshot came from %q, want %q (services %q)", last, c.service, svcs)
			}
			raw := 0
			for _, s := range svcs {
				if s == "exec:screencap" {
					raw++
				}
			}
			if c.opts.BrokenRaw && raw != 1 {
				t.Errorf("raw screencap retried after it proved unusable: %q", svcs)
			}
		})
	}
}

// editText returns the text of the first EditText node of a UI dump.
func editText(t *testing.T, dump []byte) string {
	t.Helper()
	type node struct {
		Class string `xml:"class,attr"`
		Text  string `xml:"text,attr"`
		Nodes []node `xml:"node"`
	}
	var h struct {
		Nodes []node `xml:"node"`
	}
	if err := xml.Unmarshal(dump, &h); err != nil {
		t.Fatalf("parse ui dump: %v", err)
	}
	var find func([]node) (string, bool)
	find = func(ns []node) (string, bool) {
		for _, n := range ns {
			if n.Class == "android.widget.EditText" {
				return n.Text, true
			}
			if s, ok := find(n.Nodes); ok {
				return s, true
			}
		}
		return "", false
	}
	s, ok := find(h.Nodes)
	if !ok {
		t.Fatalf("no EditText in the ui dump: %.300s", dump)
	}
	return s
}

func maxDiff(a image.Image, b *image.RGBA) int {
	worst := 0
	r := b.Rect
	for y := r.Min.Y; y < r.Max.Y; y += 7 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			c := b.RGBAAt(x, y)
			for _, d := range []int{int(r1>>8) - int(c.R), int(g1>>8) - int(c.G), int(b1>>8) - int(c.B)} {
				worst = max(worst, d, -d)
			}
		}
	}
	return worst
}

// TestADBScreenshotAuto: auto mode times both paths and keeps using them
// both only as often as it re-checks.
func TestADBScreenshotAuto(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Width: 90, Height: 160})
	p := l.phones[0]
	dev, err := capture.NewADBDevice(context.Background(), l.options(), p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	const shots = 60
	for range shots {
		b, err := dev.Screenshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		decodePNG(t, b)
	}
	raw, png := 0, 0
	for _, s := range p.Services() {
		switch s {
		case "exec:screencap":
			raw++
		case "exec:screencap -p":
			png++
		}
	}
	if raw+png != shots || raw == 0 || png == 0 {
		t.Errorf("raw %d, png %d shots: want both paths timed", raw, png)
	}
	if _, err := capture.NewADBDevice(context.Background(), capture.ADBOptions{ScreenshotMode: "jpeg"}, p.Serial()); err == nil || !strings.Contains(err.Error(), `screenshot mode "jpeg"`) {
		t.Errorf("bad mode: %v", err)
	}
}

// TestADBUIDump covers uiautomator's transient failures and phones that
// cannot dump to /dev/tty.
func TestADBUIDump(t *testing.T) {
	l := startADBLab(t,
		fakeadbd.Options{UIDumpFailures: 2},
		fakeadbd.Options{NoTTY: true},
		fakeadbd.Options{UIDumpFailures: 100},
	)
	ctx := context.Background()
	for i, name := range []string{"retried", "to a file", "gives up"} {
		t.Run(name, func(t *testing.T) {
			p := l.phones[i]
			dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
			if err != nil {
				t.Fatal(err)
			}
			xml, err := dev.UIDump(ctx)
			if i == 2 {
				if err == nil || !strings.Contains(err.Error(), "could not get idle state") || !strings.Contains(err.Error(), p.Serial()) {
					t.Fatalf("err = %v, want the uiautomator error naming the phone", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(xml, []byte("</hierarchy>")) {
				t.Fatalf("dump = %.200s", xml)
			}
			if files := p.Files(); len(files) != 0 {
				t.Errorf("dump files left on the phone: %q", files)
			}
			if i == 1 {
				// The second dump goes straight to a file.
				n := len(p.Commands())
				if _, err := dev.UIDump(ctx); err != nil {
					t.Fatal(err)
				}
				cmds := p.Commands()[n:]
				if len(cmds) == 0 || !strings.HasPrefix(cmds[0], "uiautomator dump /data/local/tmp/") {
					t.Errorf("second dump ran %q", cmds)
				}
			}
		})
	}
}

// TestADBOldPhone runs on a phone without shell protocol v2: commands go
// through the v1 shell and exit codes still count.
func TestADBOldPhone(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{NoShellV2: true, Model: "Nexus 5"})
	p := l.phones[0]
	ctx := context.Background()
	dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	if m := dev.Info().Model; m != "Nexus 5" {
		t.Errorf("model = %q", m)
	}
	if err := dev.Tap(ctx, 5, 6); err != nil {
		t.Fatal(err)
	}
	err = dev.Launch(ctx, "com.missing.app")
	if !errors.Is(err, capture.ErrAppNotInstalled) || !strings.Contains(err.Error(), "app com.missing.app is not installed on phone "+p.Serial()) {
		t.Fatalf("launch of a missing app: %v", err)
	}
	if _, err := dev.UIDump(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inputs(p); !slices.Equal(got, []string{"tap 5 6", "monkey -p com.missing.app -c android.intent.category.LAUNCHER 1"}) {
		t.Errorf("inputs = %q", got)
	}
	for _, s := range p.Services() {
		if strings.HasPrefix(s, "shell,v2") {
			t.Errorf("used %q on a phone without shell_v2", s)
		}
	}
}

// TestADBTimeout: an operation the phone does not finish fails after its
// timeout with a reason, and the phone stays usable.
func TestADBTimeout(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{InputDelay: time.Hour})
	p := l.phones[0]
	opts := l.options()
	opts.OpTimeout = 300 * time.Millisecond
	dev, err := capture.NewADBDevice(context.Background(), opts, p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	err = dev.Tap(context.Background(), 1, 2)
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), p.Serial()) {
		t.Fatalf("err = %v, want a timeout naming the phone", err)
	}
	if _, err := dev.Screenshot(context.Background()); err != nil {
		t.Fatalf("screenshot after a timed-out tap: %v", err)
	}
}

// TestADBRecordingCancelled: a job stopped during a recording kills
// screenrecord on the phone and deletes its file.
func TestADBRecordingCancelled(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	p := l.phones[0]
	dev, err := capture.NewADBDevice(context.Background(), l.options(), p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	job, cancel := context.WithCancelCause(context.Background())
	r := capture.NewRunner(job, dev, capture.RunnerOptions{})
	if _, err := r.RunStep(job, protocol.Step{Op: protocol.OpRecordStart}); err != nil {
		t.Fatal(err)
	}
	if procs := p.Processes(); !slices.Equal(procs, []string{"screenrecord"}) {
		t.Fatalf("processes after record_start = %q", procs)
	}
	cancel(errors.New("revoked"))
	r.Close() // returns once the abort is done
	if sig := p.Signals(); !slices.Equal(sig, []string{"KILL screenrecord"}) {
		t.Errorf("signals = %q, want SIGKILL to screenrecord", sig)
	}
	testenv.Eventually(t, 10*time.Second, "screenrecord to exit and its file to be deleted", func() bool {
		return len(p.Processes()) == 0 && len(p.Files()) == 0
	})
	if _, err := r.RunStep(context.Background(), protocol.Step{Op: protocol.OpScreenshot}); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("step after cancel: %v", err)
	}
}
