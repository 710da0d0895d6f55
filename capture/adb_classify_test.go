package capture_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
)

// TestADBLaunchNotInstalled: launching a package the phone has not
// installed fails with an *AppNotInstalledError naming the phone and the
// package (monkey aborts, `pm path` finds nothing), on phones with and
// without shell protocol v2; an installed package launches.
func TestADBLaunchNotInstalled(t *testing.T) {
	l := startADBLab(t,
		fakeadbd.Options{Packages: []string{"com.example.survey"}},
		fakeadbd.Options{Packages: []string{"com.example.survey"}, NoShellV2: true})
	ctx := context.Background()
	for _, p := range l.phones {
		dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Launch(ctx, "com.example.survey"); err != nil {
			t.Fatalf("launch of an installed app: %v", err)
		}
		err = dev.Launch(ctx, "com.example.absent")
		var ni *capture.AppNotInstalledError
		if !errors.Is(err, capture.ErrAppNotInstalled) || !errors.As(err, &ni) || ni.Package != "com.example.absent" || ni.Serial != p.Serial() {
			t.Fatalf("launch of an app not installed: %v", err)
		}
		if errors.Is(err, capture.ErrInvalidStep) || errors.Is(err, capture.ErrUnplugged) {
			t.Errorf("launch of an app not installed is also classified otherwise: %v", err)
		}
		if !slices.ContainsFunc(p.Commands(), func(c string) bool { return strings.HasPrefix(c, "pm path com.example.absent") }) {
			t.Errorf("the phone was not asked whether the package is installed: %q", p.Commands())
		}
		// A package name that cannot be one is the step's fault.
		if err := dev.Launch(ctx, "not a package"); !errors.Is(err, capture.ErrInvalidStep) {
			t.Errorf("launch of a malformed package name: %v, want ErrInvalidStep", err)
		}
	}
}

// TestADBServerGone: when nothing answers at the adb server's address and
// no server can be started there, the phone's operations fail with
// ErrADBServerGone (adb.ErrServerGone), not as unplugged or as the step's
// own failure.
func TestADBServerGone(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	p := l.phones[0]
	ctx := context.Background()
	opts := l.options()
	opts.ADBPath = "/nonexistent/adb" // no server can be started again
	dev, err := capture.NewADBDevice(ctx, opts, p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Tap(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	if out, err := l.srv.Run("kill-server"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{})
	defer r.Close()
	for _, s := range []protocol.Step{{Op: protocol.OpTap, X: 3, Y: 4}, {Op: protocol.OpScreenshot}} {
		_, err = r.RunStep(ctx, s)
		if !errors.Is(err, capture.ErrADBServerGone) || !errors.Is(err, adb.ErrServerGone) {
			t.Fatalf("%s with the adb server gone: %v, want ErrADBServerGone", s.Op, err)
		}
		if errors.Is(err, capture.ErrUnplugged) || !strings.Contains(err.Error(), l.srv.Addr) {
			t.Errorf("%s: error %q: want the server's address, not unplugged", s.Op, err)
		}
	}

	// The client says the same of an address where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := adb.New(adb.Options{Addr: addr, NoStart: true})
	if _, err := c.Devices(ctx); !errors.Is(err, adb.ErrServerGone) {
		t.Errorf("devices from %s: %v, want ErrServerGone", addr, err)
	}
}
