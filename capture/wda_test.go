package capture_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uitree"
)

// startIPhone starts a fake iPhone and opens it as a WDADevice.
func startIPhone(t *testing.T, fo fakewda.Options, do capture.WDAOptions) (*fakewda.Phone, *capture.WDADevice) {
	t.Helper()
	p, err := fakewda.Start(fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	do.UDID, do.URL = p.UDID(), p.URL()
	d, err := capture.OpenWDADevice(context.Background(), do)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return p, d
}

// findNode returns the first node of the dump whose ID (an iPhone's
// accessibility identifier, name) is id.
func findNode(t *testing.T, tree *uitree.Tree, id string) uitree.Node {
	t.Helper()
	for _, n := range tree.Nodes {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("no node with name %q in the dump", id)
	return uitree.Node{}
}

func dumpTree(t *testing.T, d capture.Device) (*uitree.Tree, []byte) {
	t.Helper()
	xml, err := d.UIDump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := uitree.Parse(xml)
	if err != nil {
		t.Fatalf("parse the dump: %v\n%s", err, xml)
	}
	return tree, xml
}

func TestWDADeviceInfo(t *testing.T) {
	_, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{Tags: []string{"jp"}})
	info := d.Info()
	want := protocol.Device{Serial: fakewda.DefaultUDID, State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: fakewda.DefaultModel, Tags: []string{"jp"}}
	if fmt.Sprint(info) != fmt.Sprint(want) {
		t.Fatalf("Info = %+v, want %+v", info, want)
	}
	if ok, known := capture.TypesUnicode(d); !ok || !known {
		t.Fatalf("TypesUnicode = %v, %v; an iPhone types any text", ok, known)
	}
}

func TestWDAScreenshotIsPNGInPixels(t *testing.T) {
	_, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	b, err := d.Screenshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is no PNG: %v", err)
	}
	if w, h := fakewda.DefaultWidthPt*fakewda.DefaultScale, fakewda.DefaultHeightPt*fakewda.DefaultScale; cfg.Width != w || cfg.Height != h {
		t.Fatalf("screenshot is %dx%d, want %dx%d pixels", cfg.Width, cfg.Height, w, h)
	}
}

// The dump is WDA's source with the scale and the foreground app's bundle
// id in the root's start tag; a tap at an element's centre in pixels
// (points times the scale) lands on it.
func TestWDAUIDumpAndTapInPixels(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{Scale: 2}, capture.WDAOptions{})
	tree, xml := dumpTree(t, d)
	if !bytes.Contains(xml, []byte(`<XCUIElementTypeApplication `)) ||
		!bytes.Contains(xml, []byte(` edgeagent-scale="2" edgeagent-bundle-id="com.apple.springboard">`)) {
		t.Fatalf("dump's root lacks the agent's attributes:\n%s", xml[:min(len(xml), 400)])
	}
	if tree.Platform != protocol.PlatformIOS || tree.Scale != 2 {
		t.Fatalf("parsed dump: platform %q scale %d, want ios 2", tree.Platform, tree.Scale)
	}
	shop := findNode(t, tree, "Shop")
	if shop.Package != "com.apple.springboard" {
		t.Fatalf("home screen icon's package = %q", shop.Package)
	}
	x, y := shop.Centre()
	if err := d.Tap(context.Background(), x, y); err != nil {
		t.Fatal(err)
	}
	if fg := p.Screen().Foreground(); fg != "com.example.shop" {
		t.Fatalf("after a tap at the Shop icon's centre (%d,%d) pixels, the foreground is %q", x, y, fg)
	}
	tree, _ = dumpTree(t, d)
	if tree.Nodes[0].Package != "com.example.shop" {
		t.Fatalf("dump of the shop names package %q", tree.Nodes[0].Package)
	}
}

// A long press (a swipe that does not move) holds the finger where it
// went down.
func TestWDALongPressAndSwipe(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	ctx := context.Background()
	if err := d.Swipe(ctx, 300, 1500, 300, 600, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := d.Swipe(ctx, 300, 1500, 300, 1500, 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var swipes []capture.SimCall
	for _, c := range p.Screen().History() {
		if c.Op == protocol.OpSwipe {
			swipes = append(swipes, c)
		}
	}
	if len(swipes) != 2 || swipes[0].Y2 != 600 || swipes[1].X2 != 300 || swipes[1].Y2 != 1500 || swipes[1].Duration < 500*time.Millisecond {
		t.Fatalf("the phone saw %+v, want a swipe up and a long press at (300,1500)", swipes)
	}
}

func TestWDATextJapanese(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	const s = "税込 1,408円 テスト"
	if err := d.Text(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := p.Typed(); got != s {
		t.Fatalf("the iPhone received %q, want %q", got, s)
	}
}

func TestWDAKeys(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	ctx := context.Background()
	if err := d.Launch(ctx, "com.example.shop"); err != nil {
		t.Fatal(err)
	}
	if err := d.Key(ctx, "KEYCODE_HOME"); err != nil {
		t.Fatal(err)
	}
	if fg := p.Screen().Foreground(); fg == "com.example.shop" {
		t.Fatal("after KEYCODE_HOME the shop is still in the foreground")
	}
	for _, k := range []string{"3", "KEYCODE_VOLUME_UP", "24", "volume_down", "25"} {
		if err := d.Key(ctx, k); err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
	}
	n := 0
	for _, r := range p.Requests() {
		if strings.HasSuffix(r, "/wda/pressButton") {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("%d button presses reached the phone, want 6", n)
	}
	for _, k := range []string{"KEYCODE_BACK", "4", "KEYCODE_ENTER", ""} {
		err := d.Key(ctx, k)
		if !errors.Is(err, capture.ErrInvalidStep) || !strings.Contains(fmt.Sprint(err), "KEYCODE_VOLUME_DOWN (25)") {
			t.Fatalf("key %q: %v, want an invalid step naming the keys an iPhone has", k, err)
		}
	}
}

func TestWDALaunchNotInstalled(t *testing.T) {
	_, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	err := d.Launch(context.Background(), capture.SimMissingPrefix+"app")
	var ae *capture.AppNotInstalledError
	if !errors.Is(err, capture.ErrAppNotInstalled) || !errors.As(err, &ae) || !strings.Contains(err.Error(), "not installed on iPhone") {
		t.Fatalf("launch of an app that is not installed: %v", err)
	}
	if err := d.Launch(context.Background(), "not a bundle"); !errors.Is(err, capture.ErrInvalidStep) {
		t.Fatalf("launch of a bad bundle id: %v", err)
	}
}

func TestWDAForceStopOpenURLRotate(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	ctx := context.Background()
	if err := d.Launch(ctx, "com.example.shop"); err != nil {
		t.Fatal(err)
	}
	if err := d.ForceStop(ctx, "com.example.shop"); err != nil {
		t.Fatal(err)
	}
	if fg := p.Screen().Foreground(); fg == "com.example.shop" {
		t.Fatal("the shop is still in the foreground after force_stop")
	}
	if err := d.OpenURL(ctx, "https://shop.example.com/item/1"); err != nil {
		t.Fatal(err)
	}
	if u := p.Screen().URL(); u != "https://shop.example.com/item/1" {
		t.Fatalf("the phone opened %q", u)
	}
	for _, tc := range []struct{ step, want string }{
		{protocol.OrientationLandscape, protocol.OrientationLandscape},
		{protocol.OrientationReverseLandscape, protocol.OrientationReverseLandscape},
		{protocol.OrientationReversePortrait, protocol.OrientationReversePortrait},
		// WDA cannot hand rotation back to the accelerometer: auto is
		// upright.
		{protocol.OrientationAuto, protocol.OrientationPortrait},
	} {
		if err := d.Rotate(ctx, tc.step); err != nil {
			t.Fatal(err)
		}
		if o := p.Screen().Orientation(); o != tc.want {
			t.Fatalf("rotate %s: the phone is %s, want %s", tc.step, o, tc.want)
		}
	}
	if err := d.Rotate(ctx, "sideways"); !errors.Is(err, capture.ErrInvalidStep) {
		t.Fatalf("rotate sideways: %v", err)
	}
}

// What an iPhone cannot do fails as a step that cannot run there.
func TestWDAUnsupported(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	ctx := context.Background()
	before := len(p.Requests())
	if err := d.ClearData(ctx, "com.example.shop"); !errors.Is(err, capture.ErrInvalidStep) || !strings.Contains(err.Error(), "clear") {
		t.Fatalf("clear_data: %v", err)
	}
	if rec, err := d.StartRecording(ctx); rec != nil || !errors.Is(err, capture.ErrInvalidStep) || !strings.Contains(err.Error(), "recorded") {
		t.Fatalf("record_start: %v", err)
	}
	if n := len(p.Requests()); n != before {
		t.Fatalf("refused steps sent %d requests to the phone", n-before)
	}
}

func TestWDAFacts(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{Battery: 0.42}, capture.WDAOptions{})
	f, err := d.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.IOSVersion != fakewda.DefaultIOSVersion || f.ScreenWidth != 1179 || f.ScreenHeight != 2556 ||
		f.BatteryLevel == nil || *f.BatteryLevel != 42 || f.Charging == nil || *f.Charging ||
		f.Locked == nil || *f.Locked || f.TimeZone != "Asia/Tokyo" || f.Locale != "ja-JP" ||
		f.IME != capture.IOSKeyboard || f.Apps != nil || f.AndroidVersion != "" || f.ReadAtUnixMilli == 0 {
		t.Fatalf("facts: %s (%+v)", f.Summary(), f)
	}
	p.SetBattery(1, fakewda.BatteryFull)
	if f, err = d.Facts(context.Background()); err != nil || *f.BatteryLevel != 100 || !*f.Charging {
		t.Fatalf("facts of a full phone on power: %v %s", err, f.Summary())
	}
	if info := (protocol.Device{Facts: &f}); !must(info.TypesUnicode()) {
		t.Fatal("the coordinator does not see that an iPhone types any text")
	}
}

func must(ok, known bool) bool { return ok && known }

// WDA gone: an operation fails at once as the phone being offline, with
// the fix, and the phone is offline until a probe finds WDA again.
func TestWDADroppedIsOffline(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	p.Drop()
	_, err := d.Screenshot(context.Background())
	var pse *capture.PhoneStateError
	if !errors.Is(err, capture.ErrUnplugged) || !errors.Is(err, wda.ErrNotRunning) || !errors.As(err, &pse) {
		t.Fatalf("screenshot with WDA gone: %v", err)
	}
	for _, fix := range []string{"iPhone " + p.UDID() + " is offline", "ios runwda", "xcodebuild test-without-building", "iproxy 8100 8100 -u " + p.UDID(), "wda_url"} {
		if !strings.Contains(err.Error(), fix) {
			t.Errorf("error lacks %q: %v", fix, err)
		}
	}
	info := d.Info()
	if info.State != protocol.DeviceOffline || !strings.Contains(info.Reason, "iproxy") || !strings.Contains(info.Reason, "not running") {
		t.Fatalf("Info after the drop: %+v", info)
	}
	// Later operations fail at once, without asking WDA.
	if err := d.Tap(context.Background(), 1, 1); !errors.Is(err, capture.ErrUnplugged) {
		t.Fatalf("tap on the offline phone: %v", err)
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if st := d.Refresh(context.Background(), 5*time.Second); st != protocol.DeviceReady {
		t.Fatalf("after Restore a probe finds %s (%s)", st, d.Info().Reason)
	}
	if err := d.Tap(context.Background(), 1, 1); err != nil {
		t.Fatal(err)
	}
}

// A WDA that takes requests and never answers makes the operation fail
// once its timeout passes, and the phone offline.
func TestWDAHangIsOffline(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{OpTimeout: 200 * time.Millisecond, CaptureTimeout: 200 * time.Millisecond})
	p.Hang(true)
	defer p.Hang(false)
	_, err := d.UIDump(context.Background())
	if !errors.Is(err, capture.ErrUnplugged) || !errors.Is(err, wda.ErrNotAnswering) {
		t.Fatalf("ui dump on a hung WDA: %v", err)
	}
	if st := d.Info().State; st != protocol.DeviceOffline {
		t.Fatalf("state after a hang: %s", st)
	}
	// A probe of a hung WDA ends at its timeout, offline.
	if st := d.Refresh(context.Background(), 100*time.Millisecond); st != protocol.DeviceOffline {
		t.Fatalf("probe of a hung WDA: %s", st)
	}
	p.Hang(false)
	if st := d.Refresh(context.Background(), 5*time.Second); st != protocol.DeviceReady {
		t.Fatalf("probe once WDA answers again: %s (%s)", st, d.Info().Reason)
	}
}

// A phone locked with a passcode stays locked after unlock: it is
// unauthorized, with the fix. One without a passcode is unlocked.
func TestWDALocked(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	p.SetLocked(true)
	if err := d.Unlock(context.Background()); err != nil {
		t.Fatalf("unlock of a phone without passcode: %v", err)
	}
	if p.Locked() {
		t.Fatal("the phone is still locked")
	}

	p, d = startIPhone(t, fakewda.Options{Passcode: true}, capture.WDAOptions{})
	p.SetLocked(true)
	err := d.Wake(context.Background())
	if !errors.Is(err, capture.ErrUnauthorized) || !strings.Contains(err.Error(), "passcode") || !strings.Contains(err.Error(), "Auto-Lock to Never") {
		t.Fatalf("wake of a phone locked with a passcode: %v", err)
	}
	if info := d.Info(); info.State != protocol.DeviceUnauthorized || !strings.Contains(info.Reason, "Auto-Lock") {
		t.Fatalf("Info of the locked phone: %+v", info)
	}
	if _, err := d.Screenshot(context.Background()); !errors.Is(err, capture.ErrUnauthorized) {
		t.Fatalf("screenshot of the locked phone: %v", err)
	}
	p.SetLocked(false)
	if st := d.Refresh(context.Background(), 5*time.Second); st != protocol.DeviceReady {
		t.Fatalf("probe once unlocked by hand: %s", st)
	}
}

// Every operation returns once its context ends, with the context's error
// wrapping its cause, while WDA holds the request; the phone stays usable.
func TestWDAOperationsHonourContext(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{OpTimeout: time.Hour, CaptureTimeout: time.Hour})
	ops := map[string]func(ctx context.Context) error{
		"screenshot": func(ctx context.Context) error { _, err := d.Screenshot(ctx); return err },
		"ui dump":    func(ctx context.Context) error { _, err := d.UIDump(ctx); return err },
		"tap":        func(ctx context.Context) error { return d.Tap(ctx, 10, 10) },
		"swipe":      func(ctx context.Context) error { return d.Swipe(ctx, 10, 10, 10, 500, 10*time.Millisecond) },
		"text":       func(ctx context.Context) error { return d.Text(ctx, "テスト") },
		"key":        func(ctx context.Context) error { return d.Key(ctx, "KEYCODE_HOME") },
		"launch":     func(ctx context.Context) error { return d.Launch(ctx, "com.example.shop") },
		"force_stop": func(ctx context.Context) error { return d.ForceStop(ctx, "com.example.shop") },
		"open_url":   func(ctx context.Context) error { return d.OpenURL(ctx, "https://example.com/") },
		"wake":       d.Wake,
		"unlock":     d.Unlock,
		"rotate":     func(ctx context.Context) error { return d.Rotate(ctx, protocol.OrientationLandscape) },
		"facts":      func(ctx context.Context) error { _, err := d.Facts(ctx); return err },
	}
	errStop := errors.New("job stopped")
	for name, op := range ops {
		p.Hang(true)
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { done <- op(ctx) }()
		testenv.Eventually(t, 10*time.Second, name+" to reach the phone", func() bool { return p.Pending() > 0 })
		cancel(errStop)
		err := <-done
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errStop) {
			t.Errorf("%s cancelled: %v, want context.Canceled wrapping the cause", name, err)
		}
		p.Hang(false)
		testenv.Eventually(t, 10*time.Second, "the phone to let go of "+name, func() bool { return p.Pending() == 0 })
	}
	if st := d.Info().State; st != protocol.DeviceReady {
		t.Fatalf("state after cancelled operations: %s", st)
	}
	// An operation whose context has ended does not start.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := len(p.Requests())
	if err := d.Tap(ctx, 1, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("tap with a done context: %v", err)
	}
	if n := len(p.Requests()) - before; n != 0 {
		t.Fatalf("tap with a done context sent %d requests", n)
	}
}

// A job's steps run on an iPhone as on an Android phone: a tap by
// selector finds the element in WDA's source and taps its centre.
func TestWDARunnerTapBySelector(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	ctx := context.Background()
	r := capture.NewRunner(ctx, d, capture.RunnerOptions{})
	defer r.Close()
	for i, s := range []protocol.Step{
		{Op: protocol.OpTap, Element: &protocol.Selector{Text: "Shop"}},
		{Op: protocol.OpScreenshot},
		{Op: protocol.OpUIDump},
	} {
		if _, err := r.RunStep(ctx, s); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.Op, err)
		}
	}
	if fg := p.Screen().Foreground(); fg != "com.example.shop" {
		t.Fatalf("after tapping the Shop icon by selector the foreground is %q", fg)
	}
}

// AnnotateSource finds the root's start tag after a declaration, comments
// and white space, and refuses a source without one.
func TestAnnotateSource(t *testing.T) {
	for _, tc := range []struct{ src, bundle, want string }{
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n<A x=\"1\">\n<B/></A>", "com.x", `<?xml version="1.0" encoding="UTF-8"?>` + "\n<A x=\"1\" edgeagent-scale=\"3\" edgeagent-bundle-id=\"com.x\">\n<B/></A>"},
		{"\xef\xbb\xbf <!-- a > b --><?pi x?>\n<A label='a>b' v=\"c/>\"/>", "", "\xef\xbb\xbf <!-- a > b --><?pi x?>\n<A label='a>b' v=\"c/>\" edgeagent-scale=\"3\"/>"},
		{`<A>`, `a"&<b`, `<A edgeagent-scale="3" edgeagent-bundle-id="a&quot;&amp;&lt;b">`},
	} {
		got, err := capture.AnnotateSource([]byte(tc.src), 3, tc.bundle)
		if err != nil || string(got) != tc.want {
			t.Errorf("AnnotateSource(%q) = %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
	for _, src := range []string{"", "   ", "text", `<?xml version="1.0"?>`, "<!-- open", "<?xml ", `<!DOCTYPE A [<!ENTITY x "y">]><A/>`, `<A x="1"`, `<A x=">`, `<A edgeagent-scale="9">`, `<A <B>`, `< A>`} {
		if got, err := capture.AnnotateSource([]byte(src), 3, ""); err == nil {
			t.Errorf("AnnotateSource(%q) = %q, want an error", src, got)
		}
	}
}

func TestIOSButton(t *testing.T) {
	for k, want := range map[string]string{"KEYCODE_HOME": "home", "home": "home", "3": "home", "KEYCODE_VOLUME_UP": "volumeUp", "24": "volumeUp", " keycode_volume_down ": "volumeDown", "25": "volumeDown"} {
		if got, err := capture.IOSButton(k); err != nil || got != want {
			t.Errorf("IOSButton(%q) = %q, %v; want %q", k, got, err, want)
		}
	}
}
