package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestOptionalWireFields: the deadline and the failure class and cause are
// optional on the wire (docs/protocol.md sections 5 and 6.8): left out
// when empty, so a message without them is byte for byte what an older
// peer sends, and carried under their documented names when set.
func TestOptionalWireFields(t *testing.T) {
	tok := fencing.Token{JobID: "job-7f3a", Owner: "pc-kitchen/9f2c4e1ab37d5086", Generation: 3}
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait, DurationMS: 60000}}}
	for _, c := range []struct {
		name string
		msg  any
		want string
	}{
		{"fail without class", protocol.Fail{Token: tok, Reason: "x"},
			`{"token":{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3},"reason":"x","requeue":false}`},
		{"fail classified", protocol.Fail{Token: tok, Reason: "deadline passed after 90s", Class: protocol.FailClassJob, Cause: protocol.CauseDeadline},
			`{"token":{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3},"reason":"deadline passed after 90s","requeue":false,"class":"job","cause":"deadline"}`},
		{"release", protocol.Fail{Token: tok, Reason: "agent shutting down", Requeue: true, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentShutdown},
			`{"token":{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3},"reason":"agent shutting down","requeue":true,"class":"infrastructure","cause":"agent_shutdown"}`},
		{"assign without deadline", protocol.Assign{Token: tok, LeaseTTLMS: 30000, Task: task},
			`{"token":{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3},"lease_ttl_ms":30000,"task":{"device":{},"steps":[{"op":"wait","duration_ms":60000}]}}`},
		{"assign with deadline", protocol.Assign{Token: tok, LeaseTTLMS: 30000, DeadlineMS: 84250, Task: protocol.Task{Steps: task.Steps, TimeoutMS: 90000}},
			`{"token":{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3},"lease_ttl_ms":30000,"task":{"device":{},"steps":[{"op":"wait","duration_ms":60000}],"timeout_ms":90000},"deadline_ms":84250}`},
	} {
		got, err := json.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// A coordinator reading an older agent's fail sees no class or cause.
	var f protocol.Fail
	if err := json.Unmarshal([]byte(`{"token":{"job_id":"j","owner":"a/b","generation":1},"reason":"r","requeue":false}`), &f); err != nil || f.Class != "" || f.Cause != "" {
		t.Errorf("old fail decoded as %+v, %v", f, err)
	}
}
