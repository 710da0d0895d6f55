package protocol

import (
	"strings"
	"testing"
)

func TestSelectorFactLimits(t *testing.T) {
	lvl, temp := 40, 38.5
	d := Device{Serial: "s", State: DeviceReady, Facts: &PhoneFacts{SDK: 30, BatteryLevel: &lvl, BatteryTempC: &temp, ScreenWidth: 1080, ScreenHeight: 2400}}
	for _, c := range []struct {
		sel  DeviceSelector
		want bool
	}{
		{DeviceSelector{MinBattery: 40, MaxTempC: 38.5, MinSDK: 30, MaxSDK: 30, MinScreenWidth: 1080, MinScreenHeight: 2400}, true},
		{DeviceSelector{MinBattery: 41}, false},
		{DeviceSelector{MaxTempC: 38}, false},
		{DeviceSelector{MinSDK: 31}, false},
		{DeviceSelector{MaxSDK: 29}, false},
		{DeviceSelector{MinScreenWidth: 1081}, false},
		{DeviceSelector{MinScreenHeight: 2401}, false},
	} {
		if got := c.sel.Matches(d); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.sel.Describe(), d.Facts.Summary(), got, c.want)
		}
	}
	if (DeviceSelector{MinSDK: 1}).Matches(Device{Serial: "s", State: DeviceReady}) {
		t.Error("a phone without facts matched min_sdk")
	}
	if got := (DeviceSelector{Tags: []string{"a"}, MinBattery: 20, MaxTempC: 40.5, MaxSDK: 34}).Describe(); got != "tags=a min_battery=20 max_temp_c=40.5 max_sdk=34" {
		t.Errorf("describe: %q", got)
	}
}

func TestSelectorValidate(t *testing.T) {
	for _, c := range []struct {
		sel  DeviceSelector
		want string
	}{
		{DeviceSelector{MinBattery: 101}, "min_battery: 101 is not a battery level"},
		{DeviceSelector{MinBattery: -1}, "min_battery: -1"},
		{DeviceSelector{MaxTempC: 200}, "max_temp_c: 200 is not a temperature"},
		{DeviceSelector{MinSDK: -2}, "min_sdk: -2 is negative"},
		{DeviceSelector{MinSDK: 34, MaxSDK: 30}, "min_sdk 34 is above max_sdk 30"},
		{DeviceSelector{MinScreenHeight: -5}, "min_screen_height: -5 is negative"},
		{DeviceSelector{Platform: "windows"}, `platform: "windows" is not one of android, ios`},
		{DeviceSelector{Platform: "Android"}, `platform: "Android" is not one of`},
	} {
		if err := c.sel.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.sel, err, c.want)
		}
	}
	for _, ok := range []DeviceSelector{{MinBattery: 100, MaxTempC: 45, MinSDK: 30, MaxSDK: 30}, {Platform: PlatformAndroid}, {Platform: PlatformIOS}} {
		if err := ok.Validate(); err != nil {
			t.Error(err)
		}
	}
	task := Task{Device: DeviceSelector{MinSDK: 5, MaxSDK: 4}, Steps: []Step{{Op: OpScreenshot}}}
	if err := task.Validate(); err == nil || !strings.HasPrefix(err.Error(), "device: min_sdk 5") {
		t.Errorf("task: %v", err)
	}
}

// TestNotReadyReasonResting: a resting phone's wait reason carries why it
// rests.
func TestNotReadyReasonResting(t *testing.T) {
	got := DeviceSelector{}.NotReadyReason([]Device{{Serial: "R1", State: DeviceResting, Reason: "battery 47.5 °C over the 45 °C limit"}})
	if want := "phone R1 is resting (battery 47.5 °C over the 45 °C limit): it is offered jobs again"; !strings.HasPrefix(got, want) {
		t.Errorf("%q, want %q…", got, want)
	}
}
