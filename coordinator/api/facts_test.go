package api_test

import (
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestPhoneFactsAndSelectors: GET /api/v1/agents shows each phone's facts
// and why a resting phone rests (the transport validates every answer
// against docs/openapi.yaml); a fan-out on fact limits makes jobs only for
// the phones whose facts are within them, and an impossible limit is a 422
// naming the field.
func TestPhoneFactsAndSelectors(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"a"}, "read", "submit")
	ip := func(n int) *int { return &n }
	fp := func(f float64) *float64 { return &f }
	on := true
	devs := []protocol.Device{
		{Serial: "s1", State: protocol.DeviceReady, Model: "Pixel 7", Facts: &protocol.PhoneFacts{
			AndroidVersion: "13", SDK: 33, Fingerprint: "google/panther", ScreenWidth: 1080, ScreenHeight: 2400, Density: 420,
			BatteryLevel: ip(80), BatteryTempC: fp(31.5), Charging: &on, BatteryHealth: "good", ScreenOn: &on, Locked: &on,
			FreeStorageMB: new(int64(2048)), IME: "com.android.adbkeyboard", ReadAtUnixMilli: 1700000000000}},
		{Serial: "s2", State: protocol.DeviceReady, Model: "Pixel 7", Facts: &protocol.PhoneFacts{SDK: 26, BatteryLevel: ip(90), BatteryTempC: fp(30)}},
		{Serial: "s3", State: protocol.DeviceResting, Model: "Pixel 7", Reason: "battery 47.0 °C over the 45 °C limit (offered again at 40 °C)",
			Facts: &protocol.PhoneFacts{SDK: 34, BatteryLevel: ip(90), BatteryTempC: fp(47)}},
		{Serial: "s4", State: protocol.DeviceReady, Model: "Pixel 7"},
	}
	if _, _, err := e.store.AgentHello(t.Context(), jobstore.AgentHello{AgentID: "pc-1", BootID: "b1", Devices: devs, Slots: 2}); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/agents", tok, "")
	if r.status != 200 || !strings.Contains(string(r.body), `"battery_temp_c":31.5`) || !strings.Contains(string(r.body), `"state":"resting","model":"Pixel 7","reason":"battery 47.0 °C over the 45 °C limit`) {
		t.Fatalf("agents: %d %s", r.status, r.body)
	}
	var batch api.BatchView
	r = e.do("POST", "/api/v1/jobs", tok, `{"fan_out": true, "device": {"min_sdk": 30, "min_battery": 50, "max_temp_c": 40}, "steps": [{"op": "screenshot"}]}`)
	r.decode(t, &batch)
	if r.status != 201 || len(batch.Jobs) != 1 || batch.Jobs[0].Selector.Serial != "s1" || batch.Jobs[0].Selector.MinSDK != 30 {
		t.Fatalf("fan-out on facts: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, `{"device": {"min_sdk": 34, "max_sdk": 30}, "steps": [{"op": "screenshot"}]}`)
	if p := r.problem(t); r.status != 422 || p.Field != "device" || !strings.Contains(p.Detail, "min_sdk 34 is above max_sdk 30") {
		t.Errorf("impossible selector: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, `{"device": {"min_battery": 101}, "steps": [{"op": "screenshot"}]}`)
	if r.status != 422 || !strings.Contains(string(r.body), "min_battery: 101 is not a battery level") {
		t.Errorf("min_battery 101: %d %s", r.status, r.body)
	}
}
