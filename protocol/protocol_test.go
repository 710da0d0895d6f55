package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

func TestSubjects(t *testing.T) {
	if got := protocol.CoordSubject("pc1", protocol.VerbRenew); got != "edge.v1.coord.pc1.renew" {
		t.Fatalf("CoordSubject = %q", got)
	}
	if got := protocol.AgentSubject("pc1", protocol.VerbRevoke); got != "edge.v1.agent.pc1.revoke" {
		t.Fatalf("AgentSubject = %q", got)
	}
	id, verb, err := protocol.ParseCoordSubject("edge.v1.coord.pc-1.result")
	if err != nil || id != "pc-1" || verb != "result" {
		t.Fatalf("ParseCoordSubject = %q %q %v", id, verb, err)
	}
	for _, bad := range []string{"edge.v1.coord.pc1", "edge.v2.coord.pc1.renew", "edge.v1.agent.pc1.renew", "edge.v1.coord.p*c.renew", "x.v1.coord.a.b"} {
		if _, _, err := protocol.ParseCoordSubject(bad); err == nil {
			t.Errorf("ParseCoordSubject(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "a>", "x*"} {
		if protocol.ValidateAgentID(bad) == nil {
			t.Errorf("ValidateAgentID(%q) accepted", bad)
		}
	}
}

// TestCheckJobID: a job id is one subject token and one key element, at
// most 64 characters (docs/protocol.md section 2).
func TestCheckJobID(t *testing.T) {
	for _, id := range []string{"a", "job-1", "J_2", "0123456789abcdef01234567", strings.Repeat("x", 64)} {
		if err := protocol.CheckJobID(id); err != nil {
			t.Errorf("CheckJobID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "victim/g1", "../x", "a..b", "a.b", "a b", " a", "é", "job\n", "a*", "a>", strings.Repeat("x", 65), strings.Repeat("x", 2000)} {
		err := protocol.CheckJobID(id)
		if err == nil || !strings.Contains(err.Error(), "invalid job id") {
			t.Errorf("CheckJobID(%q) = %v, want a refusal", id, err)
		}
	}
}

func TestTaskValidate(t *testing.T) {
	ok := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "a.png"}, {Op: protocol.OpLaunch, Package: "com.x"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, task := range map[string]protocol.Task{
		"empty":          {},
		"unknown op":     {Steps: []protocol.Step{{Op: "explode"}}},
		"launch no pkg":  {Steps: []protocol.Step{{Op: protocol.OpLaunch}}},
		"path traversal": {Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "../x.png"}}},
		"negative x":     {Steps: []protocol.Step{{Op: protocol.OpTap, X: -1}}},
		"empty text":     {Steps: []protocol.Step{{Op: protocol.OpText}}},
		"empty key":      {Steps: []protocol.Step{{Op: protocol.OpKey}}},
		"lone stop":      {Steps: []protocol.Step{{Op: protocol.OpRecordStop}}},
		"same name":      {Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "a"}, {Op: protocol.OpScreenshot, Name: "a.png"}}},
	} {
		if task.Validate() == nil {
			t.Errorf("%s: Validate accepted", name)
		}
	}
}

// TestTaskValidateText: a text step types printable characters of any
// script (Japanese included); control characters and invalid UTF-8 are
// refused, the error naming the step and the character, not the text.
func TestTaskValidateText(t *testing.T) {
	for _, text := range []string{"hello world ~!", "grüße", "東京 ラーメン", "😀"} {
		ok := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpText, Text: text}}}
		if err := ok.Validate(); err != nil {
			t.Errorf("text %q refused: %v", text, err)
		}
	}
	if protocol.NeedsIME("hello ~") || !protocol.NeedsIME("東京") || !protocol.NeedsIME("é") {
		t.Error("NeedsIME: want true exactly for text beyond printable ASCII")
	}
	for _, text := range []string{"tab\there", "line\n", "bell\a", "bad\xffutf8"} {
		task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.x"}, {Op: protocol.OpText, Text: text}}}
		err := task.Validate()
		if err == nil {
			t.Errorf("text %q accepted", text)
			continue
		}
		if !strings.Contains(err.Error(), "steps[1]: text:") || !strings.Contains(err.Error(), "not") {
			t.Errorf("text %q: error %q does not name the step", text, err)
		}
		if strings.Contains(err.Error(), text) {
			t.Errorf("text %q: error %q quotes the text", text, err)
		}
	}
}

// TestStepValidateNewOps: wake, unlock, open_url, force_stop, clear_data
// and rotate, with the field each needs; errors name the field.
func TestStepValidateNewOps(t *testing.T) {
	good := []protocol.Step{
		{Op: protocol.OpWake},
		{Op: protocol.OpUnlock},
		{Op: protocol.OpOpenURL, URL: "https://example.com/search?q=%E6%9D%B1"},
		{Op: protocol.OpOpenURL, URL: "myapp://item/42"},
		{Op: protocol.OpOpenURL, URL: "market://details?id=com.example"},
		{Op: protocol.OpForceStop, Package: "com.example.shop"},
		{Op: protocol.OpClearData, Package: "com.example.shop"},
		{Op: protocol.OpRotate, Orientation: "landscape"},
		{Op: protocol.OpRotate, Orientation: "auto"},
	}
	for _, s := range good {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	bad := map[string]struct {
		step protocol.Step
		want string
	}{
		"open_url without url":    {protocol.Step{Op: protocol.OpOpenURL}, "url: open_url needs url"},
		"relative url":            {protocol.Step{Op: protocol.OpOpenURL, URL: "/search"}, "url: url has no scheme"},
		"url with a space":        {protocol.Step{Op: protocol.OpOpenURL, URL: "https://example.com/a b"}, "url: url has a space"},
		"url with a newline":      {protocol.Step{Op: protocol.OpOpenURL, URL: "https://example.com/\n"}, "control character"},
		"https without host":      {protocol.Step{Op: protocol.OpOpenURL, URL: "https:///path"}, "needs a host"},
		"url too long":            {protocol.Step{Op: protocol.OpOpenURL, URL: "https://e.com/" + strings.Repeat("a", 2000)}, "longer than 2000"},
		"url does not parse":      {protocol.Step{Op: protocol.OpOpenURL, URL: "https://[::1/"}, "url: url does not parse"},
		"force_stop without pkg":  {protocol.Step{Op: protocol.OpForceStop}, "package: force_stop needs package"},
		"clear_data without pkg":  {protocol.Step{Op: protocol.OpClearData}, "package: clear_data needs package"},
		"rotate without argument": {protocol.Step{Op: protocol.OpRotate}, `orientation: "" is not one of portrait, landscape`},
		"rotate sideways":         {protocol.Step{Op: protocol.OpRotate, Orientation: "sideways"}, `orientation: "sideways" is not one of`},
	}
	for name, c := range bad {
		err := c.step.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

// TestHeartbeatDevicesEncoding: an empty devices list is sent as [] (no
// phones now), a nil one is left out (unchanged).
func TestHeartbeatDevicesEncoding(t *testing.T) {
	for _, c := range []struct {
		hb   protocol.Heartbeat
		want string
	}{
		{protocol.Heartbeat{BootID: "b"}, `{"boot_id":"b","free":0}`},
		{protocol.Heartbeat{BootID: "b", Devices: []protocol.Device{}}, `{"boot_id":"b","devices":[],"free":0}`},
	} {
		b, err := json.Marshal(c.hb)
		if err != nil || string(b) != c.want {
			t.Errorf("marshal %+v = %s, %v; want %s", c.hb, b, err, c.want)
		}
	}
	var hb protocol.Heartbeat
	if err := json.Unmarshal([]byte(`{"boot_id":"b","devices":[]}`), &hb); err != nil || hb.Devices == nil || len(hb.Devices) != 0 {
		t.Fatalf(`"devices": [] decodes to %#v, %v; want an empty non-nil list`, hb.Devices, err)
	}
}
