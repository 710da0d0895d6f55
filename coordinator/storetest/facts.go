package storetest

import (
	"errors"
	"fmt"
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
