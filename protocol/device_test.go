package protocol_test

import (
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

func TestSelectorMatches(t *testing.T) {
	d := protocol.Device{Serial: "R58", State: "device", Model: "SM-G991B", Tags: []string{"eu", "rooted"}}
	for _, tc := range []struct {
		sel  protocol.DeviceSelector
		dev  protocol.Device
		want bool
	}{
		{protocol.DeviceSelector{}, d, true},
		{protocol.DeviceSelector{Serial: "R58"}, d, true},
		{protocol.DeviceSelector{Serial: "R5"}, d, false},
		{protocol.DeviceSelector{Model: "SM-G991B"}, d, true},
		{protocol.DeviceSelector{Model: "sm-g991b"}, d, false}, // case-sensitive
		{protocol.DeviceSelector{Tags: []string{"eu"}}, d, true},
		{protocol.DeviceSelector{Tags: []string{"rooted", "eu"}}, d, true},
		{protocol.DeviceSelector{Tags: []string{"eu", "us"}}, d, false},
		{protocol.DeviceSelector{Serial: "R58", Model: "SM-G991B", Tags: []string{"eu"}}, d, true},
		{protocol.DeviceSelector{}, protocol.Device{Serial: "R58", State: "offline"}, false},
		{protocol.DeviceSelector{}, protocol.Device{Serial: "R58", State: "unauthorized"}, false},
	} {
		if got := tc.sel.Matches(tc.dev); got != tc.want {
			t.Errorf("%+v.Matches(%+v) = %v", tc.sel, tc.dev, got)
		}
	}

	offline := protocol.Device{Serial: "R58", State: protocol.DeviceOffline, Model: "SM-G991B"}
	if sel := (protocol.DeviceSelector{Model: "SM-G991B"}); !sel.Fits(offline) || sel.Matches(offline) {
		t.Errorf("an offline phone of the right model fits but does not match")
	}
	if got := (protocol.DeviceSelector{}).Describe(); got != "any" {
		t.Errorf("Describe of the empty selector = %q", got)
	}
}

func TestReadyDevices(t *testing.T) {
	devs := protocol.ReadyDevices([]protocol.Device{{Serial: "b", State: "device"}, {Serial: "a", State: "device"}, {Serial: "c", State: "offline"}, {State: "device"}})
	if len(devs) != 2 || devs[0].Serial != "a" || devs[1].Serial != "b" {
		t.Errorf("ReadyDevices = %+v", devs)
	}
}

// TestNotReadyReason: a job whose only fitting phone is unauthorized is
// told so, with the fix; a ready phone or no fitting phone gives "".
func TestNotReadyReason(t *testing.T) {
	listed := []protocol.Device{
		{Serial: "B2", State: protocol.DeviceOffline, Tags: []string{"eu"}},
		{Serial: "A1", State: protocol.DeviceUnauthorized, Tags: []string{"eu"}},
		{Serial: "C3", State: protocol.DeviceReady, Tags: []string{"us"}},
	}
	got := protocol.DeviceSelector{Serial: "A1"}.NotReadyReason(listed)
	if !strings.HasPrefix(got, "phone A1 is unauthorized: unlock it and accept the USB debugging prompt") || !strings.Contains(got, "ADB_VENDOR_KEYS") {
		t.Errorf("reason for the unauthorized phone = %q", got)
	}
	got = protocol.DeviceSelector{Tags: []string{"eu"}}.NotReadyReason(listed)
	if !strings.HasPrefix(got, "phone A1 is unauthorized: ") || !strings.Contains(got, "; phone B2 is offline: reconnect the USB cable") {
		t.Errorf("reason for two phones = %q", got)
	}
	for _, sel := range []protocol.DeviceSelector{{Serial: "C3"}, {}, {Serial: "Z9"}} {
		if got := sel.NotReadyReason(listed); got != "" {
			t.Errorf("%s: reason %q, want none", sel.Describe(), got)
		}
	}
}

// TestNotReadyReasonIPhone: an iPhone's reason carries the iPhone's fix
// (its WebDriverAgent, its passcode), never the Android one (USB cable,
// USB debugging prompt); an Android phone in the same state keeps its own.
func TestNotReadyReasonIPhone(t *testing.T) {
	listed := []protocol.Device{
		{Serial: "00008110-000A1B2C3D4E5F60", Platform: protocol.PlatformIOS, State: protocol.DeviceOffline, Tags: []string{"lab"}},
		{Serial: "00008110-000A1B2C3D4E5F61", Platform: protocol.PlatformIOS, State: protocol.DeviceUnauthorized, Tags: []string{"lab"}},
		{Serial: "R58M12", State: protocol.DeviceOffline, Tags: []string{"lab"}},
	}
	got := protocol.DeviceSelector{Serial: "00008110-000A1B2C3D4E5F60"}.NotReadyReason(listed)
	if !strings.Contains(got, "start WebDriverAgent on the iPhone") || strings.Contains(got, "USB cable") {
		t.Errorf("reason for the offline iPhone = %q, want the WebDriverAgent fix only", got)
	}
	got = protocol.DeviceSelector{Serial: "00008110-000A1B2C3D4E5F61"}.NotReadyReason(listed)
	if !strings.Contains(got, "unlock it (it has a passcode") || strings.Contains(got, "USB debugging") {
		t.Errorf("reason for the locked iPhone = %q, want the passcode fix only", got)
	}
	got = protocol.DeviceSelector{Tags: []string{"lab"}}.NotReadyReason(listed)
	if !strings.Contains(got, "phone R58M12 is offline: reconnect the USB cable") || !strings.Contains(got, "is offline: start WebDriverAgent") {
		t.Errorf("reason for an offline iPhone and Android phone = %q, want each with its platform's fix", got)
	}
	for _, st := range []string{protocol.DeviceOffline, protocol.DeviceUnauthorized, protocol.DeviceQuarantined, protocol.DeviceRecovering, "connecting"} {
		ios := protocol.DeviceFix(protocol.Device{Platform: protocol.PlatformIOS, State: st})
		if !strings.Contains(ios, "WebDriverAgent") && !strings.Contains(ios, "passcode") || strings.Contains(ios, "adb") || strings.Contains(ios, "USB") {
			t.Errorf("iPhone fix for %s = %q", st, ios)
		}
		if got, want := protocol.DeviceFix(protocol.Device{State: st}), protocol.StateFix(st); got != want {
			t.Errorf("Android fix for %s = %q, want StateFix's %q", st, got, want)
		}
	}
}
