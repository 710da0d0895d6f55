package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestCaptureKeysOfAHostileAgent: with the real edgecoord binary, an
// agent answers a session step, and the session's close, naming object
// keys of its own choosing: another job's object, a path that climbs out
// of the jobs, an object under its own prefix that it never registered.
// The coordinator presigns only the key that is under the session token's
// own prefix and registered; the others appear nowhere in the replies,
// and the coordinator logs each refusal.
func TestCaptureKeysOfAHostileAgent(t *testing.T) {
	e := newBinaryEnv(t, 3*time.Second)
	a := coordtest.Start(t, coordtest.Options{ID: "pc-evil", URL: e.url,
		Devices:  []protocol.Device{{Serial: "evil-1", State: protocol.DeviceReady, Model: "Pixel-Sim"}},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})

	foreign := []string{
		"jobs/someone-elses-job/g1/secret.png",
		"../../not/even/jobs",
		"jobs/../../etc/passwd.png",
	}
	var (
		mu                sync.Mutex
		own, unregistered string
	)
	// The agent's step handler: every step is answered with the keys
	// above beside its own; a finish commits the result and names them in
	// the manifest.
	sub, err := a.Conn().Subscribe(protocol.AgentSubject("pc-evil", protocol.VerbStep), func(m *nats.Msg) {
		var req protocol.StepRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Errorf("decode step request: %v", err)
			return
		}
		rep := protocol.StepReply{Seq: 1, Op: req.Step.Op, Outcome: protocol.OutcomeOK}
		mu.Lock()
		keys := append([]string{own, unregistered}, foreign...)
		mu.Unlock()
		if req.Finish {
			if err := a.Request(t.Context(), protocol.VerbResult, protocol.Result{Token: req.Token, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{}); err != nil {
				t.Errorf("result: %v", err)
			}
			rep.Finished, rep.Manifest = true, keys
		} else {
			rep.Artifacts = keys
		}
		data, _ := json.Marshal(rep)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	var doc session.Doc
	code, body := e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"serial": "evil-1"}}`, &doc)
	if code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	testenv.Eventually(t, 10*time.Second, "the agent holds the session's job", func() bool { return len(a.Assigns()) == 1 })
	tok := a.Assigns()[0]
	mu.Lock()
	own, unregistered = tok.ObjectKey("shot.png"), tok.ObjectKey("never-registered.png")
	mu.Unlock()
	if err := a.Request(t.Context(), protocol.VerbArtifact, protocol.Artifact{Token: tok, Name: "shot.png", Key: own,
		Size: 1, SHA256: strings.Repeat("ab", 32), ContentType: "image/png"}, &protocol.Ack{}); err != nil {
		t.Fatalf("register %s: %v", own, err)
	}

	check := func(what string, body []byte, caps []session.Capture) {
		t.Helper()
		if len(caps) != 1 || caps[0].Key != own || caps[0].URL == "" {
			t.Errorf("%s: captures %+v, want only %s with a URL", what, caps, own)
		}
		for _, k := range append([]string{unregistered}, foreign...) {
			if strings.Contains(string(body), k) {
				t.Errorf("%s: the reply names the refused key %s: %s", what, k, body)
			}
		}
	}
	var rep stepsReply
	code, body = e.call("POST", "/api/v1/sessions/"+doc.ID+"/steps", tokenOperator, `{"steps": [{"op": "screenshot"}]}`, &rep)
	if code != 200 || len(rep.Steps) != 1 {
		t.Fatalf("step: %d %s", code, body)
	}
	check("step", body, rep.Steps[0].Captures)

	var closed session.Doc
	code, body = e.call("DELETE", "/api/v1/sessions/"+doc.ID, tokenOperator, nil, &closed)
	if code != 200 {
		t.Fatalf("close: %d %s", code, body)
	}
	check("close", body, closed.Artifacts)

	// Each refusal is logged with the job and the key, twice (step and
	// close) for each refused key.
	for _, k := range append([]string{unregistered}, foreign...) {
		want := fmt.Sprintf("%q", k)
		testenv.Eventually(t, 5*time.Second, "the refusal of "+k+" logged", func() bool {
			n := 0
			for _, l := range e.bin.Grep("capture key refused") {
				if strings.Contains(l, want) && strings.Contains(l, tok.JobID) {
					n++
				}
			}
			return n == 2
		})
	}
}
