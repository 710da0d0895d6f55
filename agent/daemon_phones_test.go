package agent

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestBuildPhonesADB: the daemon's phone wiring finds a phone through the
// real adb server, with the tags from the config, next to a simulated one;
// a phone the adb server lists but the config's devices do not is not
// offered.
func TestBuildPhonesADB(t *testing.T) {
	adb := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 7"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	if out, err := adb.Run("connect", phone.Addr()); err != nil {
		t.Fatalf("adb connect: %v: %s", err, out)
	}
	other, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 6"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	adb.Connect(t, other.Addr(), "device")
	cfg := config.DefaultAgent()
	cfg.ADB.Address = adb.Addr
	cfg.ADB.Path = adb.Path
	cfg.Devices = []config.Device{
		{Serial: phone.Serial(), Tags: []string{"garage"}},
		{Serial: "sim-1", Simulated: true},
	}
	inv, closePhones, err := buildPhones(context.Background(), cfg, nil, zerolog.Nop())
	if err != nil {
		t.Fatalf("buildPhones: %v", err)
	}
	defer closePhones()
	phones := InventoryPhones(inv, t.TempDir(), capture.OpLogOptions{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		var real, sim *protocol.Device
		inv := phones.Inventory()
		for i := range inv {
			switch inv[i].Serial {
			case phone.Serial():
				real = &inv[i]
			case "sim-1":
				sim = &inv[i]
			}
		}
		if real != nil && sim != nil && real.State == "device" && real.Model == "Pixel 7" && len(real.Tags) == 1 && real.Tags[0] == "garage" {
			if len(inv) != 2 {
				t.Fatalf("inventory %+v: want only the listed adb phone and sim-1, not %s", inv, other.Serial())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inventory %+v: want the adb phone (device, Pixel 7, tag garage) and sim-1", inv)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A job on the adb phone runs through the host protocol.
	p, release, err := phones.Acquire(context.Background(), protocol.DeviceSelector{Tags: []string{"garage"}})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	arts, err := p.RunStep(context.Background(), protocol.Step{Op: protocol.OpScreenshot, Name: "x.png"})
	if err != nil || len(arts) != 1 || arts[0].Size == 0 {
		t.Fatalf("screenshot over adb: %v %+v", err, arts)
	}
	if _, err := p.RunStep(context.Background(), protocol.Step{Op: protocol.OpTap, X: 5, Y: 6}); err != nil {
		t.Fatal(err)
	}
	var tapped bool
	for _, ev := range phone.Inputs() {
		if ev.String() == "tap 5 6" {
			tapped = true
		}
	}
	if !tapped {
		t.Fatalf("phone received %v, want tap 5 6", phone.Inputs())
	}
}
