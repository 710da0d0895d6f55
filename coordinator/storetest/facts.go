package storetest

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// testClaimForFactSelectors: a selector's fact limits (min_battery,
// max_temp_c, min_sdk, max_sdk, min_screen_width, min_screen_height) are
// applied by the store as protocol.DeviceSelector.Matches applies them,
// bounds included; a phone that does not know a fact does not match a
// limit on it.
func testClaimForFactSelectors(t *testing.T, s sqlstore.Lab) {
	ip := func(n int) *int { return &n }
	fp := func(f float64) *float64 { return &f }
	type facts = protocol.PhoneFacts
	cases := []struct {
		sel   protocol.DeviceSelector
		facts *facts
		want  bool
	}{
		{protocol.DeviceSelector{}, nil, true},
		{protocol.DeviceSelector{MinBattery: 50}, &facts{BatteryLevel: ip(60)}, true},
		{protocol.DeviceSelector{MinBattery: 50}, &facts{BatteryLevel: ip(50)}, true},
		{protocol.DeviceSelector{MinBattery: 50}, &facts{BatteryLevel: ip(49)}, false},
		{protocol.DeviceSelector{MinBattery: 50}, &facts{SDK: 33}, false},
		{protocol.DeviceSelector{MinBattery: 50}, nil, false},
		{protocol.DeviceSelector{MaxTempC: 40.5}, &facts{BatteryTempC: fp(40.5)}, true},
		{protocol.DeviceSelector{MaxTempC: 40.5}, &facts{BatteryTempC: fp(40.6)}, false},
		{protocol.DeviceSelector{MaxTempC: 40}, &facts{BatteryTempC: fp(-3)}, true},
		{protocol.DeviceSelector{MaxTempC: 40}, &facts{BatteryLevel: ip(90)}, false},
		{protocol.DeviceSelector{MinSDK: 30, MaxSDK: 33}, &facts{SDK: 30}, true},
		{protocol.DeviceSelector{MinSDK: 30, MaxSDK: 33}, &facts{SDK: 33}, true},
		{protocol.DeviceSelector{MinSDK: 30, MaxSDK: 33}, &facts{SDK: 29}, false},
		{protocol.DeviceSelector{MinSDK: 30, MaxSDK: 33}, &facts{SDK: 34}, false},
		{protocol.DeviceSelector{MaxSDK: 33}, &facts{BatteryLevel: ip(5)}, false},
		{protocol.DeviceSelector{MinScreenWidth: 1080, MinScreenHeight: 2000}, &facts{ScreenWidth: 1080, ScreenHeight: 2400}, true},
		{protocol.DeviceSelector{MinScreenWidth: 1080}, &facts{ScreenWidth: 720, ScreenHeight: 2400}, false},
		{protocol.DeviceSelector{MinScreenHeight: 2000}, &facts{ScreenWidth: 1080, ScreenHeight: 1920}, false},
		{protocol.DeviceSelector{MinScreenHeight: 2000}, &facts{}, false},
		{protocol.DeviceSelector{Tags: []string{"eu"}, MinBattery: 20, MaxTempC: 45, MinSDK: 26},
			&facts{BatteryLevel: ip(20), BatteryTempC: fp(45), SDK: 26}, true},
	}
	for i, c := range cases {
		serial := fmt.Sprintf("F%02d", i)
		sel := c.sel
		sel.Serial = serial
		dev := protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: "M", Tags: []string{"eu"}, Facts: c.facts}
		if got := sel.Matches(dev); got != c.want {
			t.Fatalf("case %d: protocol says %v, want %v (%s, facts %s)", i, got, c.want, sel.Describe(), c.facts.Summary())
		}
		id := "facts-" + serial
		submitSel(t, s, id, sel)
		l, err := claimFor(t, s, ownerA, 1000, dev)
		switch {
		case c.want && (err != nil || l.Token.JobID != id || l.Device != serial):
			t.Fatalf("case %d (%s, facts %s): claim %v on %q, %v; want the job", i, sel.Describe(), c.facts.Summary(), l.Token, l.Device, err)
		case !c.want && !errors.Is(err, jobstore.ErrNoJob):
			t.Fatalf("case %d (%s, facts %s): claim %v on %q, %v; want no job", i, sel.Describe(), c.facts.Summary(), l.Token, l.Device, err)
		}
	}
}

// testClaimForAppSelectors: a selector's app requirements (device.apps)
// are applied by the store as protocol.DeviceSelector.Matches applies
// them: each operator on the versionName (numbers compared as numbers,
// 5.2 equal to 5.2.0, a suffix after the numbers ignored) and on the
// versionCode, bounds included, several comparisons and several apps at
// once; a phone whose apps are not known, that lacks the app, or whose
// version does not compare does not match. The task read back carries the
// requirements as submitted.
func testClaimForAppSelectors(t *testing.T, s sqlstore.Lab) {
	const shop, other = "com.example.shop", "org.example.maps"
	app := func(pkg, name string, code int64) protocol.AppVersion {
		return protocol.AppVersion{Package: pkg, VersionName: name, VersionCode: code}
	}
	apps := func(a ...protocol.AppVersion) *protocol.PhoneFacts { return &protocol.PhoneFacts{SDK: 33, Apps: a} }
	req := func(kv ...string) protocol.DeviceSelector {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return protocol.DeviceSelector{Apps: m}
	}
	cases := []struct {
		sel   protocol.DeviceSelector
		facts *protocol.PhoneFacts
		want  bool
	}{
		{req(shop, ">=5.2"), apps(app(shop, "5.2.1", 521)), true},
		{req(shop, ">=5.2"), apps(app(shop, "5.2", 520)), true},
		{req(shop, ">=5.2"), apps(app(shop, "5.1.9", 519)), false},
		{req(shop, ">=5.2"), apps(app(shop, "5.10", 510)), true},
		{req(shop, ">=5.10"), apps(app(shop, "5.9.9", 599)), false},
		{req(shop, ">5.2"), apps(app(shop, "5.2.0", 520)), false},
		{req(shop, ">5.2"), apps(app(shop, "5.2.0.1", 520)), true},
		{req(shop, "=5.2"), apps(app(shop, "5.2.0", 520)), true},
		{req(shop, "5.2"), apps(app(shop, "5.2.1", 521)), false},
		{req(shop, "<6"), apps(app(shop, "5.99.1-beta", 599)), true},
		{req(shop, "<6"), apps(app(shop, "6.0", 600)), false},
		{req(shop, "<=6"), apps(app(shop, "6.0.0", 600)), true},
		{req(shop, ">=5.2, <6"), apps(app(shop, "5.3 (build 77)", 530)), true},
		{req(shop, ">=5.2, <6"), apps(app(shop, "6.1", 610)), false},
		{req(shop, ">=12.0"), apps(app(shop, "2023.11.02", 1)), true},
		{req(shop, ">=1"), apps(app(shop, "v5.2", 520)), false},
		{req(shop, ">=1"), apps(app(shop, "", 520)), false},
		{req(shop, "code>=521"), apps(app(shop, "5.2.1", 521)), true},
		{req(shop, "code>521"), apps(app(shop, "5.2.1", 521)), false},
		{req(shop, "code<1000000000000"), apps(app(shop, "5.2.1", 999999999999)), true},
		{req(shop, "code=521"), apps(app(shop, "5.2.1", 0)), false},
		{req(shop, "*"), apps(app(shop, "", 0)), true},
		{req(shop, "*"), apps(app(other, "1.0", 1)), false},
		{req(shop, "*"), apps(), false},
		{req(shop, "*"), &protocol.PhoneFacts{SDK: 33}, false},
		{req(shop, "*"), nil, false},
		{req(shop, ">=5", other, "<2"), apps(app(other, "1.5", 15), app(shop, "5.0", 50)), true},
		{req(shop, ">=5", other, "<2"), apps(app(other, "2.0", 20), app(shop, "5.0", 50)), false},
		{req(shop, ">=5", other, "<2"), apps(app(shop, "5.0", 50)), false},
		{protocol.DeviceSelector{MinSDK: 34, Apps: map[string]string{shop: ">=1"}}, apps(app(shop, "5.0", 50)), false},
		{protocol.DeviceSelector{}, apps(app(shop, "5.0", 50)), true},
	}
	for i, c := range cases {
		serial := fmt.Sprintf("A%02d", i)
		sel := c.sel
		sel.Serial = serial
		dev := protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: "M", Facts: c.facts}
		var listed []protocol.AppVersion
		if c.facts != nil {
			listed = c.facts.Apps
		}
		if got := sel.Matches(dev); got != c.want {
			t.Fatalf("case %d: protocol says %v, want %v (%s, apps %v)", i, got, c.want, sel.Describe(), listed)
		}
		id := "apps-" + serial
		submitSel(t, s, id, sel)
		l, err := claimFor(t, s, ownerA, 1000, dev)
		switch {
		case c.want && (err != nil || l.Token.JobID != id || l.Device != serial):
			t.Fatalf("case %d (%s, apps %v): claim %v on %q, %v; want the job", i, sel.Describe(), listed, l.Token, l.Device, err)
		case !c.want && !errors.Is(err, jobstore.ErrNoJob):
			t.Fatalf("case %d (%s, apps %v): claim %v on %q, %v; want no job", i, sel.Describe(), listed, l.Token, l.Device, err)
		case c.want && !maps.Equal(l.Task.Device.Apps, sel.Apps):
			t.Fatalf("case %d: the granted task asks for apps %v, submitted %v", i, l.Task.Device.Apps, sel.Apps)
		}
	}
}

// testClaimSessionWithoutIME: a session's interactive job, which has no
// steps, is granted on a phone whose facts tell it lacks the input method
// for text beyond ASCII (it has no text to type yet).
func testClaimSessionWithoutIME(t *testing.T, s sqlstore.Lab) {
	if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: "session-no-ime", Task: protocol.Task{Interactive: true}, AllowInteractive: true}); err != nil {
		t.Fatal(err)
	}
	dev := protocol.Device{Serial: "NOIME", State: protocol.DeviceReady, Facts: &protocol.PhoneFacts{SDK: 33, ReadAtUnixMilli: 1}}
	if ok, known := dev.TypesUnicode(); ok || !known {
		t.Fatalf("the phone should be known to lack the input method: %v %v", ok, known)
	}
	l, err := claimFor(t, s, ownerA, 1, dev)
	if err != nil || l.Token.JobID != "session-no-ime" || l.Device != "NOIME" {
		t.Fatalf("claim: %v on %q, %v; want the session's job", l.Token, l.Device, err)
	}
}

// testClaimForPlatformSelectors: a selector's platform (device.platform)
// is applied by the store as protocol.DeviceSelector.Matches applies it: a
// job for iPhones is granted only on a phone reported as one, a job for
// Android phones only on a phone reported as Android or reported without
// a platform, a job without a platform on either; among several free
// phones the job takes the first of its platform.
func testClaimForPlatformSelectors(t *testing.T, s sqlstore.Lab) {
	const android, ios = protocol.PlatformAndroid, protocol.PlatformIOS
	cases := []struct {
		sel, phone string
		want       bool
	}{
		{"", "", true},
		{"", android, true},
		{"", ios, true},
		{android, "", true},
		{android, android, true},
		{android, ios, false},
		{ios, ios, true},
		{ios, "", false},
		{ios, android, false},
	}
	for i, c := range cases {
		serial := fmt.Sprintf("P%02d", i)
		sel := protocol.DeviceSelector{Serial: serial, Platform: c.sel}
		dev := protocol.Device{Serial: serial, State: protocol.DeviceReady, Platform: c.phone, Model: "M"}
		if got := sel.Matches(dev); got != c.want {
			t.Fatalf("case %d: protocol says %v, want %v (%s, phone platform %q)", i, got, c.want, sel.Describe(), c.phone)
		}
		id := "platform-" + serial
		submitSel(t, s, id, sel)
		l, err := claimFor(t, s, ownerA, 1000, dev)
		switch {
		case c.want && (err != nil || l.Token.JobID != id || l.Device != serial):
			t.Fatalf("case %d (%s, phone platform %q): claim %v on %q, %v; want the job", i, sel.Describe(), c.phone, l.Token, l.Device, err)
		case !c.want && !errors.Is(err, jobstore.ErrNoJob):
			t.Fatalf("case %d (%s, phone platform %q): claim %v on %q, %v; want no job", i, sel.Describe(), c.phone, l.Token, l.Device, err)
		case c.want && l.Task.Device.Platform != c.sel:
			t.Fatalf("case %d: the granted task asks for platform %q, submitted %q", i, l.Task.Device.Platform, c.sel)
		}
	}
	// Several free phones of one agent: each job goes to a phone of its
	// platform, whatever comes first in serial order.
	phones := []protocol.Device{
		{Serial: "00008110-A", State: protocol.DeviceReady, Platform: ios, Model: "iPhone 15"},
		{Serial: "R5CT", State: protocol.DeviceReady, Model: "SM-G991B"},
	}
	submitSel(t, s, "for-android", protocol.DeviceSelector{Platform: android})
	submitSel(t, s, "for-ios", protocol.DeviceSelector{Platform: ios})
	want := map[string]string{"for-android": "R5CT", "for-ios": "00008110-A"}
	for range 2 {
		l, err := claimFor(t, s, ownerB, 1000, phones...)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if l.Device != want[l.Token.JobID] {
			t.Fatalf("job %s granted on %q, want %q", l.Token.JobID, l.Device, want[l.Token.JobID])
		}
		delete(want, l.Token.JobID)
	}
}
