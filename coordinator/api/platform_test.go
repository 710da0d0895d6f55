package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestSubmitPlatform: a job's device.platform is android, ios or left
// out, anything else a 422 naming device.platform; what an iPhone cannot
// do (logcat, record_start/stop, install_app, clear_data) is refused with
// a 422 naming the field and the iPhones for a job for iPhones, a job
// pinned to a phone its agent reports as an iPhone and a fan-out whose
// phones include iPhones; such a job without a platform runs on Android
// phones only (its selector shows platform android), and a schedule whose
// job is refused is refused at create. GET /api/v1/agents shows each
// phone's platform (the transport checks it against docs/openapi.yaml).
func TestSubmitPlatform(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, jobstore.ScopeRead, jobstore.ScopeSubmit, jobstore.ScopeOperate)
	const udid = "00008110-000A1B2C3D4E5F60"
	devs := []protocol.Device{
		{Serial: udid, State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 15", Facts: &protocol.PhoneFacts{IOSVersion: "17.5.1"}},
		{Serial: "R5CT", State: protocol.DeviceReady, Model: "SM-G991B"},
	}
	if _, _, err := e.store.AgentHello(t.Context(), jobstore.AgentHello{AgentID: "pc-1", BootID: "b1", Devices: devs, Slots: 2}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("GET", "/api/v1/agents", tok, ""); r.status != 200 || !strings.Contains(string(r.body), `"serial":"`+udid+`","state":"device","platform":"ios"`) {
		t.Fatalf("agents: %d %s", r.status, r.body)
	}

	refused := func(what, body, field string, want ...string) {
		t.Helper()
		r := e.do("POST", "/api/v1/jobs", tok, body)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		p := r.problem(t)
		if p.Field != field {
			t.Errorf("%s: field %q, want %q (%s)", what, p.Field, field, p.Detail)
		}
		for _, w := range want {
			if !strings.Contains(p.Detail, w) {
				t.Errorf("%s: detail %q lacks %q", what, p.Detail, w)
			}
		}
	}
	refused("unknown platform", `{"device": {"platform": "windows"}, "steps": [{"op": "screenshot"}]}`,
		"device.platform", `"windows" is not one of android, ios`)
	refused("iPhones asked for logcat", `{"device": {"platform": "ios"}, "logcat": true, "steps": [{"op": "screenshot"}, {"op": "record_start"}, {"op": "record_stop"}]}`,
		"logcat", "logcat: an iPhone has no logcat", "steps[1].op record_start", "steps[2].op record_stop", "device.platform is ios")
	refused("iPhones asked to clear data", `{"device": {"platform": "ios"}, "steps": [{"op": "clear_data", "package": "com.example.shop"}]}`,
		"steps[0].op", "steps[0].op clear_data", "device.platform is ios")
	refused("iPhones asked for the back key", `{"device": {"platform": "ios"}, "steps": [{"op": "key", "key": "KEYCODE_HOME"}, {"op": "key", "key": "KEYCODE_BACK"}]}`,
		"steps[1].key", `steps[1].key "KEYCODE_BACK": an iPhone has only the keys KEYCODE_HOME (3), KEYCODE_VOLUME_UP (24) and KEYCODE_VOLUME_DOWN (25)`)
	refused("pinned to an iPhone", `{"device": {"serial": "`+udid+`"}, "steps": [{"op": "wake"}, {"op": "record_start"}, {"op": "record_stop"}]}`,
		"steps[1].op", "device.serial names an iPhone: "+udid+" of agent pc-1")
	refused("fan-out over an iPhone", `{"fan_out": true, "logcat": true, "steps": [{"op": "screenshot"}]}`,
		"logcat", "matching phones include iPhones: "+udid+" of agent pc-1", "set device.platform android")

	// What an iPhone can do runs anywhere; an iPhone's job without what it
	// cannot do is queued as asked.
	var j api.JobView
	r := e.do("POST", "/api/v1/jobs", tok, `{"device": {"platform": "ios"}, "steps": [{"op": "screenshot"}]}`)
	j = api.JobView{}
	r.decode(t, &j)
	if r.status != http.StatusCreated || j.Selector.Platform != protocol.PlatformIOS {
		t.Fatalf("iPhone job: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, `{"device": {"serial": "`+udid+`"}, "steps": [{"op": "screenshot"}]}`)
	j = api.JobView{}
	r.decode(t, &j)
	if r.status != http.StatusCreated || j.Selector.Platform != "" {
		t.Fatalf("job pinned to the iPhone: %d %s", r.status, r.body)
	}
	// Without a platform, what an iPhone cannot do makes the job Android's.
	for _, body := range []string{
		`{"logcat": true, "steps": [{"op": "screenshot"}]}`,
		`{"device": {"serial": "R5CT"}, "steps": [{"op": "clear_data", "package": "com.example.shop"}]}`,
	} {
		r = e.do("POST", "/api/v1/jobs", tok, body)
		j = api.JobView{}
		r.decode(t, &j)
		if r.status != http.StatusCreated || j.Selector.Platform != protocol.PlatformAndroid {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	var batch api.BatchView
	r = e.do("POST", "/api/v1/jobs", tok, `{"fan_out": true, "device": {"platform": "android"}, "logcat": true, "steps": [{"op": "screenshot"}]}`)
	r.decode(t, &batch)
	if r.status != http.StatusCreated || len(batch.Jobs) != 1 || batch.Jobs[0].Selector.Serial != "R5CT" {
		t.Fatalf("fan-out over Android phones: %d %s", r.status, r.body)
	}

	// Schedules: the job of a schedule is checked as a submitted one.
	for _, c := range []struct{ job, field, want string }{
		{`{"device": {"platform": "ios"}, "logcat": true, "steps": [{"op": "screenshot"}]}`, "job.logcat", "device.platform is ios"},
		{`{"device": {"serial": "` + udid + `"}, "logcat": true, "steps": [{"op": "screenshot"}]}`, "job.logcat", "device.serial names an iPhone"},
		{`{"fan_out": true, "steps": [{"op": "record_start"}, {"op": "record_stop"}]}`, "job.steps[0].op", "matching phones include iPhones: " + udid},
		{`{"device": {"platform": "ipados"}, "steps": [{"op": "screenshot"}]}`, "job.device.platform", "is not one of android, ios"},
	} {
		r := e.do("POST", "/api/v1/schedules", tok, `{"every": "1h", "job": `+c.job+`}`)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("schedule of %s: %d %s", c.job, r.status, r.body)
		}
		if p := r.problem(t); p.Field != c.field || !strings.Contains(p.Detail, c.want) {
			t.Errorf("schedule of %s: field %q, detail %q; want %q, %q", c.job, p.Field, p.Detail, c.field, c.want)
		}
	}
	if r := e.do("POST", "/api/v1/schedules", tok, `{"every": "1h", "job": {"logcat": true, "steps": [{"op": "screenshot"}]}}`); r.status != http.StatusCreated {
		t.Fatalf("schedule of an Android job: %d %s", r.status, r.body)
	}
}
