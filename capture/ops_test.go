package capture_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
)

// runner acquires the lab's phone i and returns a runner on it.
func (l *adbLab) runner(t *testing.T, inv *capture.Inventory, i int) (*capture.Runner, capture.Device) {
	t.Helper()
	dev, release, err := inv.AcquireMatching(context.Background(), protocol.DeviceSelector{Serial: l.phones[i].Serial()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	r := capture.NewRunner(context.Background(), dev, capture.RunnerOptions{})
	t.Cleanup(r.Close)
	return r, dev
}

// TestADBNewOps: wake, unlock, open_url, force_stop, clear_data and rotate
// through the real adb server reach the fake phone as the shell commands
// docs/capture.md lists, and change the phone as they do on the simulated
// phone.
func TestADBNewOps(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Locked: true, Packages: []string{"com.example.shop"}})
	p := l.phones[0]
	inv := l.inventory(t, l.options())
	r, dev := l.runner(t, inv, 0)
	ctx := context.Background()
	sim := capture.NewSimulated(capture.SimOptions{Locked: true, Packages: []string{"com.example.shop"}})
	simR := capture.NewRunner(ctx, sim, capture.RunnerOptions{})
	defer simR.Close()

	steps := []struct {
		step  protocol.Step
		cmd   string // the shell command the phone receives
		check func(s *capture.Simulated) string
	}{
		{protocol.Step{Op: protocol.OpWake}, "input keyevent KEYCODE_WAKEUP", func(s *capture.Simulated) string {
			if awake, locked := s.ScreenState(); !awake || !locked {
				return "wake: want the screen on and still locked"
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpUnlock}, "input keyevent KEYCODE_WAKEUP && wm dismiss-keyguard", func(s *capture.Simulated) string {
			if awake, locked := s.ScreenState(); !awake || locked {
				return "unlock: want the screen on and unlocked"
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpLaunch, Package: "com.example.shop"}, "monkey -p com.example.shop -c android.intent.category.LAUNCHER 1", nil},
		{protocol.Step{Op: protocol.OpForceStop, Package: "com.example.shop"}, "am force-stop com.example.shop", func(s *capture.Simulated) string {
			if s.Foreground() != capture.SimLauncher {
				return "force_stop: the app is still in the foreground: " + s.Foreground()
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpClearData, Package: "com.example.shop"}, "pm clear com.example.shop", func(s *capture.Simulated) string {
			if s.Cleared("com.example.shop") != 1 {
				return "clear_data: the app's data was not cleared"
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpOpenURL, URL: "https://example.com/search?q=it's"}, `am start -a android.intent.action.VIEW -d 'https://example.com/search?q=it'\''s'`, func(s *capture.Simulated) string {
			if s.URL() != "https://example.com/search?q=it's" || s.Foreground() != capture.SimBrowser {
				return "open_url: url " + s.URL() + " in " + s.Foreground()
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpOpenURL, URL: "myshop://item/42"}, "am start -a android.intent.action.VIEW -d 'myshop://item/42'", func(s *capture.Simulated) string {
			if s.URL() != "myshop://item/42" {
				return "open_url: deep link not opened: " + s.URL()
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpRotate, Orientation: protocol.OrientationLandscape}, "settings put system accelerometer_rotation 0 && settings put system user_rotation 1", func(s *capture.Simulated) string {
			if s.Orientation() != protocol.OrientationLandscape {
				return "rotate: orientation " + s.Orientation()
			}
			return ""
		}},
		{protocol.Step{Op: protocol.OpRotate, Orientation: protocol.OrientationAuto}, "settings put system accelerometer_rotation 1", func(s *capture.Simulated) string {
			if s.Orientation() != protocol.OrientationAuto {
				return "rotate auto: orientation " + s.Orientation()
			}
			return ""
		}},
	}
	for _, c := range steps {
		if err := c.step.Validate(); err != nil {
			t.Fatalf("%s: %v", c.step.Op, err)
		}
		before := len(p.Commands())
		if _, err := r.RunStep(ctx, c.step); err != nil {
			t.Fatalf("%s over adb: %v", c.step.Op, err)
		}
		if _, err := simR.RunStep(ctx, c.step); err != nil {
			t.Fatalf("%s on the simulated phone: %v", c.step.Op, err)
		}
		if cmds := p.Commands()[before:]; !slices.Contains(cmds, c.cmd) {
			t.Errorf("%s: the phone received %q, want %q", c.step.Op, cmds, c.cmd)
		}
		if c.check != nil {
			for name, s := range map[string]*capture.Simulated{"adb": p.Sim(), "simulated": sim} {
				if msg := c.check(s); msg != "" {
					t.Errorf("%s phone: %s", name, msg)
				}
			}
		}
	}
	if v, _ := p.Setting("system", "accelerometer_rotation"); v != "1" {
		t.Errorf("accelerometer_rotation = %q after rotate auto", v)
	}

	// What one runner refuses, the other refuses alike: an app the phone
	// lacks, and steps protocol.Step.Validate refuses before any phone is
	// asked.
	for _, c := range []struct {
		step protocol.Step
		is   error
	}{
		{protocol.Step{Op: protocol.OpClearData, Package: "com.missing.app"}, capture.ErrAppNotInstalled},
		{protocol.Step{Op: protocol.OpRotate, Orientation: "sideways"}, capture.ErrInvalidStep},
		{protocol.Step{Op: protocol.OpOpenURL, URL: "not a url"}, capture.ErrInvalidStep},
	} {
		_, aerr := r.RunStep(ctx, c.step)
		_, serr := simR.RunStep(ctx, c.step)
		if !errors.Is(aerr, c.is) || !errors.Is(serr, c.is) {
			t.Errorf("%+v: adb error %v, simulated error %v; want both %v", c.step, aerr, serr, c.is)
		}
	}
	// Asked directly, past the runner, both phones refuse them too.
	for name, d := range map[string]capture.Device{"adb": dev, "simulated": sim} {
		if err := d.Rotate(ctx, "sideways"); !errors.Is(err, capture.ErrInvalidStep) {
			t.Errorf("%s phone: rotate sideways: %v, want ErrInvalidStep", name, err)
		}
		if err := d.OpenURL(ctx, "not a url"); !errors.Is(err, capture.ErrInvalidStep) {
			t.Errorf("%s phone: open_url of no URL: %v, want ErrInvalidStep", name, err)
		}
	}
}

// TestADBTextThroughIME: Japanese text is typed
// through the ADBKeyboard broadcast and reaches the fake phone byte for
// byte, ASCII still through input text, and the input method that was
// current is selected again; a phone without the input method refuses the
// text with the fix, never half-typed, and so does the simulated phone.
func TestADBTextThroughIME(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{IME: true}, fakeadbd.Options{})
	withIME, without := l.phones[0], l.phones[1]
	inv := l.inventory(t, l.options())
	r, dev := l.runner(t, inv, 0)
	ctx := context.Background()
	if has, known := capture.TypesUnicode(dev); !has || !known {
		t.Errorf("TypesUnicode of the phone with ADBKeyboard = %v, %v", has, known)
	}
	japanese := "東京 ラーメン「味噌」 it's 100% 😀"
	for _, s := range []protocol.Step{{Op: protocol.OpText, Text: "abc"}, {Op: protocol.OpText, Text: japanese}} {
		if _, err := r.RunStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := withIME.IMETexts(); len(got) != 1 || got[0] != japanese {
		t.Errorf("the input method typed %q, want exactly %q", got, japanese)
	}
	if got := withIME.Sim().Typed(); got != "abc"+japanese {
		t.Errorf("the field holds %q, want %q", got, "abc"+japanese)
	}
	if got := inputs(withIME); !slices.Equal(got, []string{"text abc"}) {
		t.Errorf("input commands = %q, want only the ASCII text", got)
	}
	if got := withIME.CurrentIME(); got != "com.android.inputmethod.latin/.LatinIME" {
		t.Errorf("current input method after typing = %q, want the previous one again", got)
	}

	r2, dev2 := l.runner(t, inv, 1)
	if has, known := capture.TypesUnicode(dev2); has || !known {
		t.Errorf("TypesUnicode of the phone without ADBKeyboard = %v, %v", has, known)
	}
	sim := capture.NewSimulated(capture.SimOptions{})
	simR := capture.NewRunner(ctx, sim, capture.RunnerOptions{})
	defer simR.Close()
	for name, rr := range map[string]*capture.Runner{"adb": r2, "simulated": simR} {
		_, err := rr.RunStep(ctx, protocol.Step{Op: protocol.OpText, Text: japanese})
		if !errors.Is(err, capture.ErrNoIME) || !errors.Is(err, capture.ErrInvalidStep) || !strings.Contains(err.Error(), "install it on the phone") || !strings.Contains(err.Error(), capture.IMEPackage) {
			t.Errorf("%s: Japanese text on a phone without the input method: %v; want ErrNoIME naming what to install", name, err)
		}
		if strings.Contains(err.Error(), "東京") {
			t.Errorf("%s: the error quotes the text: %v", name, err)
		}
	}
	if got, typed := inputs(without), without.Sim().Typed(); len(got) != 0 || typed != "" {
		t.Errorf("the phone without the input method got %q, typed %q: want nothing", got, typed)
	}
	simIME := capture.NewSimulated(capture.SimOptions{IME: true})
	if err := simIME.Text(ctx, japanese); err != nil || simIME.Typed() != japanese {
		t.Errorf("simulated phone with the input method: %v, typed %q", err, simIME.Typed())
	}
}

// TestOpLogNewOpsParams: the operation log keeps a rotate's orientation
// and the package of force_stop and clear_data, and an open_url's length,
// not the URL, unless text is kept.
func TestOpLogNewOpsParams(t *testing.T) {
	l := capture.NewOpLog(capture.OpLogOptions{})
	p := l.Params(protocol.Step{Op: protocol.OpOpenURL, URL: "https://example.com/?q=secret"})
	if p["url_len"] != 29 || p["url"] != nil {
		t.Errorf("open_url params = %v", p)
	}
	if p := capture.NewOpLog(capture.OpLogOptions{IncludeText: true}).Params(protocol.Step{Op: protocol.OpOpenURL, URL: "myapp://x"}); p["url"] != "myapp://x" {
		t.Errorf("open_url params with text kept = %v", p)
	}
	if p := l.Params(protocol.Step{Op: protocol.OpRotate, Orientation: "auto"}); p["orientation"] != "auto" {
		t.Errorf("rotate params = %v", p)
	}
	if p := l.Params(protocol.Step{Op: protocol.OpClearData, Package: "com.x.y"}); p["package"] != "com.x.y" {
		t.Errorf("clear_data params = %v", p)
	}
}
