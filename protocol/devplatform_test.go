package protocol

import (
	"slices"
	"testing"
)

// TestUnsupportedOn: what an iPhone cannot do is named field by field; an
// Android phone can do all of it, and an iPhone everything else.
func TestUnsupportedOn(t *testing.T) {
	task := Task{Logcat: true, Steps: []Step{
		{Op: OpLaunch, Package: "com.example.shop"},
		{Op: OpRecordStart},
		{Op: OpKey, Key: "KEYCODE_BACK"},
		{Op: OpKey, Key: "home"},
		{Op: OpKey, Key: "24"},
		{Op: OpClearData, Package: "com.example.shop"},
		{Op: OpInstallApp, APK: "ab"},
		{Op: OpRecordStop, Name: "r.mp4"},
	}}
	want := []string{
		"logcat: an iPhone has no logcat",
		"steps[1].op record_start: an iPhone's screen cannot be recorded without a Mac",
		`steps[2].key "KEYCODE_BACK": ` + IOSKeys,
		"steps[5].op clear_data: WebDriverAgent cannot clear an iOS app's data",
		"steps[6].op install_app: an iPhone installs no APK",
		"steps[7].op record_stop: an iPhone's screen cannot be recorded without a Mac",
	}
	if got := UnsupportedOn(PlatformIOS, task); !slices.Equal(got, want) {
		t.Errorf("UnsupportedOn(ios):\n got %q\nwant %q", got, want)
	}
	if got := UnsupportedOn(PlatformAndroid, task); got != nil {
		t.Errorf("UnsupportedOn(android) = %q, want nil", got)
	}
	ok := Task{Steps: []Step{{Op: OpLaunch, Package: "p"}, {Op: OpTap, X: 1, Y: 2}, {Op: OpText, Text: "ほうじ茶"}, {Op: OpScreenshot, Name: "s.png"}}}
	if got := UnsupportedOn(PlatformIOS, ok); got != nil {
		t.Errorf("UnsupportedOn(ios) of what an iPhone does = %q", got)
	}
	for key, button := range map[string]string{"KEYCODE_HOME": "home", "3": "home", "HOME": "home", " volume_up ": "volumeUp", "25": "volumeDown"} {
		if b, ok := IOSButton(key); !ok || b != button {
			t.Errorf("IOSButton(%q) = %q %v, want %q", key, b, ok, button)
		}
	}
	for _, key := range []string{"", "4", "KEYCODE_BACK", "POWER"} {
		if b, ok := IOSButton(key); ok {
			t.Errorf("IOSButton(%q) = %q, want none", key, b)
		}
	}
}
