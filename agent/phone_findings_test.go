package agent_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// japaneseTask types Japanese text into a field.
var japaneseTask = protocol.Task{Steps: []protocol.Step{
	{Op: protocol.OpTap, X: 10, Y: 10},
	{Op: protocol.OpText, Text: "ASCII first"},
	{Op: protocol.OpText, Text: "東京 ラーメン"},
	{Op: protocol.OpScreenshot},
}}

// TestAssignRefusesUnicodeWithoutIME: a job that
// types text beyond ASCII is refused at assign with 400 naming the step
// and what to install when its phone has no input method for it, so that
// nothing is half-typed; with the input method it runs and the text
// arrives whole. Through real adb with fake phones, and on the simulated
// phone.
func TestAssignRefusesUnicodeWithoutIME(t *testing.T) {
	leakCheck(t)
	phones, fakes := adbPhones(t, fakeadbd.Options{}, fakeadbd.Options{IME: true})
	r := newRig(t, rigSetup{phones: phones})
	without, with := fakes[0], fakes[1]

	task := japaneseTask
	task.Device = protocol.DeviceSelector{Serial: without.Serial()}
	tok := r.token(1)
	err := r.coord.assign("pc-a", tok, task)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Fatalf("assign of Japanese text to a phone without the input method: %v, want 400", err)
	}
	for _, want := range []string{"steps[2]: text:", "phone " + without.Serial(), "cannot type text beyond ASCII", capture.IMEPackage, "install it on the phone"} {
		if !strings.Contains(pe.Description, want) {
			t.Errorf("refusal %q lacks %q", pe.Description, want)
		}
	}
	if strings.Contains(pe.Description, "東京") {
		t.Errorf("refusal %q quotes the text", pe.Description)
	}
	if in := without.Inputs(); len(in) != 0 {
		t.Errorf("the refused job reached the phone: %v", in)
	}

	task.Device = protocol.DeviceSelector{Serial: with.Serial()}
	tok = r.token(1)
	if err := r.coord.assign("pc-a", tok, task); err != nil {
		t.Fatalf("assign to the phone with the input method: %v", err)
	}
	r.waitGone(tok.JobID)
	if fs := r.coord.fails(tok); len(fs) != 0 {
		t.Fatalf("job failed: %+v", fs)
	}
	if got := with.IMETexts(); len(got) != 1 || got[0] != "東京 ラーメン" {
		t.Errorf("the input method typed %q", got)
	}
	if got := with.Sim().Typed(); got != "ASCII first東京 ラーメン" {
		t.Errorf("the field holds %q", got)
	}
}

// TestAssignRefusesUnicodeWithoutIMESimulated: the simulated phone behaves
// the same: refused without the input method, typed with it.
func TestAssignRefusesUnicodeWithoutIMESimulated(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	err := r.coord.assign("pc-a", tok, japaneseTask)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Description, "steps[2]: text: phone sim-1 cannot type text beyond ASCII") {
		t.Fatalf("assign of Japanese text to the simulated phone without the input method: %v, want 400 with the fix", err)
	}
	if h := r.phone.History(); len(h) != 0 {
		t.Fatalf("the refused job ran %+v", h)
	}
	r.phone.SetIME(true)
	tok = r.token(1)
	if err := r.coord.assign("pc-a", tok, japaneseTask); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	if got := r.phone.Typed(); got != "ASCII first東京 ラーメン" {
		t.Errorf("the field holds %q", got)
	}
}

// TestWaitUnplugFailsJob: a phone unplugged during a wait step fails the
// job during the wait as infrastructure/phone_unplugged, as for any other
// step.
func TestWaitUnplugFailsJob(t *testing.T) {
	leakCheck(t)
	phones, fakes := adbPhones(t, fakeadbd.Options{})
	r := newRig(t, rigSetup{phones: phones, ttl: 60 * time.Second})
	tok := r.token(1)
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: 1, Y: 1}, {Op: protocol.OpWait, DurationMS: 3_600_000}, {Op: protocol.OpTap, X: 2, Y: 2}}}
	if err := r.coord.assign("pc-a", tok, task); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the wait step to begin after the first tap", func() bool {
		for _, j := range r.a.Jobs() {
			if j.Token == tok && j.Step == 2 {
				return len(fakes[0].Inputs()) == 1
			}
		}
		return false
	})
	fakes[0].Unplug()
	f := r.waitFail(tok, protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged)
	if !strings.Contains(f.Reason, "run step 2 (wait)") {
		t.Errorf("fail reason %q: want the wait step named", f.Reason)
	}
}
