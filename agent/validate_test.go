package agent_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// invalidTasks breaks each rule of docs/protocol.md section 5 (Task and
// steps) once; want is a piece of the error naming what is wrong.
var invalidTasks = []struct {
	name string
	task protocol.Task
	want string
}{
	{"no steps", protocol.Task{}, "steps: task has no steps"},
	{"negative idle timeout", protocol.Task{Interactive: true, IdleTimeoutMS: -1}, "idle_timeout_ms"},
	{"negative timeout", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}, TimeoutMS: -1}, "timeout_ms: -1 is negative"},
	{"unknown op", protocol.Task{Steps: []protocol.Step{{Op: "explode"}}}, `steps[0]: op: unknown op "explode"`},
	{"missing op", protocol.Task{Steps: []protocol.Step{{X: 1}}}, "steps[0]: op: missing"},
	{"launch without package", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch}}}, "steps[0]: package"},
	{"negative tap x", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: -1, Y: 5}}}, "steps[0]: x: coordinate -1 is negative"},
	{"negative tap y", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: 1, Y: -5}}}, "steps[0]: y: coordinate -5 is negative"},
	{"negative swipe x2", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpSwipe, X: 1, Y: 1, X2: -2, Y2: 3}}}, "steps[0]: x2"},
	{"negative swipe y2", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpSwipe, X: 1, Y: 1, X2: 2, Y2: -3}}}, "steps[0]: y2"},
	{"negative duration", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait, DurationMS: -10}}}, "steps[0]: duration_ms: -10 is negative"},
	{"empty text", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpText}}}, "steps[0]: text: text step needs non-empty text"},
	{"text with a control character", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpText, Text: "gr\tüße"}}}, "steps[0]: text: character 3 (U+0009) is not printable"},
	{"empty key", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpKey}}}, "steps[0]: key: key step needs non-empty key"},
	{"bad name", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "../x"}}}, "steps[0]: name: invalid artifact name"},
	{"name too long with extension", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: strings.Repeat("a", 199)}}}, "steps[0]: name: with .png appended"},
	{"duplicate name", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "a"}, {Op: protocol.OpScreenshot, Name: "a.png"}}}, `steps[1]: artifact name "a.png" is already produced by steps[0]`},
	{"name equal to a default name", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpUIDump}, {Op: protocol.OpUIDump, Name: "ui_dump-001"}}}, `steps[1]: artifact name "ui_dump-001.xml"`},
	{"recording name twice", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpRecordStart, Name: "r"}, {Op: protocol.OpRecordStop}, {Op: protocol.OpRecordStart}, {Op: protocol.OpRecordStop, Name: "r"}}}, `steps[3]: artifact name "r.mp4"`},
	{"record_stop without record_start", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpRecordStop}}}, "steps[0]: record_stop without a record_start"},
	{"record_start twice", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpRecordStart}, {Op: protocol.OpRecordStart}}}, "steps[1]: record_start while the recording of steps[0] runs"},
	{"effect on a capture", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Effect: &protocol.EffectSpec{Key: "k"}}}}, "steps[0]: effect: op"},
	{"effect key reserved", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, Effect: &protocol.EffectSpec{Key: "edgecoord/x"}}}}, "steps[0]: effect: key"},
	{"install_app with a bad apk", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpInstallApp, APK: "shop.apk"}}}, "steps[0]: apk: "},
	{"install_app without its download", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpInstallApp, APK: strings.Repeat("a", 64)}}}, "steps[0].apk: the assign says not where to download apk aaaa"},
	{"effect key twice", protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, Effect: &protocol.EffectSpec{Key: "k"}}, {Op: protocol.OpTap, Effect: &protocol.EffectSpec{Key: "k"}}}}, `steps[1]: effect key "k" is already used`},
}

// TestAssignRefusesInvalidTasks: every invalid task
// is refused at assign with 400 naming what is wrong, and nothing runs on
// the phone nor reaches the coordinator for it.
func TestAssignRefusesInvalidTasks(t *testing.T) {
	r := newRig(t, rigSetup{})
	for _, c := range invalidTasks {
		tok := r.token(1)
		err := r.coord.assign("pc-a", tok, c.task)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
			t.Errorf("%s: assign answered %v, want 400", c.name, err)
			continue
		}
		if !strings.Contains(pe.Description, c.want) {
			t.Errorf("%s: error %q does not say %q", c.name, pe.Description, c.want)
		}
		if reqs := r.coord.requests(tok.JobID); len(reqs) != 0 {
			t.Errorf("%s: the refused job sent %v", c.name, r.coord.verbs(tok.JobID))
		}
	}
	if h := r.phone.History(); len(h) != 0 {
		t.Fatalf("the phone ran %+v for refused tasks", h)
	}
	// The valid neighbours of the rules are taken.
	ok := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpTap, X: 0, Y: 0, X2: -1}, // x2 is not a tap's field
		{Op: protocol.OpRecordStart, Name: "r"}, {Op: protocol.OpRecordStop},
		{Op: protocol.OpRecordStart}, {Op: protocol.OpRecordStop},
		{Op: protocol.OpScreenshot}, {Op: protocol.OpScreenshot, Name: "screenshot-001"},
	}}
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, ok); err != nil {
		t.Fatalf("valid task refused: %v", err)
	}
	r.waitGone(tok.JobID)
	if v := r.coord.verbs(tok.JobID); v[len(v)-1] != protocol.VerbResult {
		t.Fatalf("valid task ended with %v, want a result", v)
	}
}

// TestStepVerbRefusesInvalidSteps: the step verb answers 400 to
// a step that breaks a rule of its own, naming the field, and runs
// nothing.
func TestStepVerbRefusesInvalidSteps(t *testing.T) {
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Interactive: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		step protocol.Step
		want string
	}{
		{"unknown op", protocol.Step{Op: "explode"}, "step: op: unknown op"},
		{"launch without package", protocol.Step{Op: protocol.OpLaunch}, "step: package"},
		{"negative x", protocol.Step{Op: protocol.OpTap, X: -3}, "step: x: coordinate -3 is negative"},
		{"negative swipe y2", protocol.Step{Op: protocol.OpSwipe, Y2: -1}, "step: y2"},
		{"negative duration", protocol.Step{Op: protocol.OpWait, DurationMS: -1}, "step: duration_ms"},
		{"empty text", protocol.Step{Op: protocol.OpText}, "step: text"},
		{"empty key", protocol.Step{Op: protocol.OpKey}, "step: key"},
		{"bad name", protocol.Step{Op: protocol.OpUIDump, Name: "a/b"}, "step: name"},
		{"bad effect", protocol.Step{Op: protocol.OpWait, Effect: &protocol.EffectSpec{Key: "k"}}, "step: effect"},
	} {
		var rep protocol.StepReply
		err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: c.step}, &rep)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
			t.Errorf("%s: step answered %+v, %v, want 400", c.name, rep, err)
			continue
		}
		if !strings.Contains(pe.Description, c.want) {
			t.Errorf("%s: error %q does not say %q", c.name, pe.Description, c.want)
		}
	}
	if h := r.phone.History(); len(h) != 0 {
		t.Fatalf("the phone ran %+v for refused steps", h)
	}
	var rep protocol.StepReply
	if err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Finish: true}, &rep); err != nil || !rep.Finished {
		t.Fatalf("finish: %+v %v", rep, err)
	}
}

// TestHeartbeatSaysNoPhones: an agent without phones says so in
// its heartbeat with "devices": [], not by leaving the field out (which
// means unchanged).
func TestHeartbeatSaysNoPhones(t *testing.T) {
	r := newRig(t, rigSetup{phones: agent.InventoryPhones(capture.NewInventory(), "", capture.OpLogOptions{})})
	testenv.Eventually(t, 10*time.Second, "a heartbeat", func() bool {
		for _, q := range r.coord.requests("") {
			if q.verb == protocol.VerbHeartbeat {
				if !strings.Contains(string(q.data), `"devices":[]`) {
					t.Fatalf("heartbeat %s: want \"devices\":[]", q.data)
				}
				return true
			}
		}
		return false
	})
}
