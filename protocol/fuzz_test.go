package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
)

// The fuzz targets check that no input makes a decoder of the wire protocol
// panic, and that what a decoder accepts is consistent: a decoded message
// encodes to a body that decodes to the same message, and what Validate
// accepts is well formed. Seeds live in testdata/fuzz.

// messageTypes returns a fresh value of every message body of protocol v1,
// both directions, by name.
func messageTypes() map[string]any {
	return map[string]any{
		"Hello": &Hello{}, "HelloReply": &HelloReply{}, "Heartbeat": &Heartbeat{}, "Ack": &Ack{},
		"Assign": &Assign{}, "Renew": &Renew{}, "RenewReply": &RenewReply{},
		"Upload": &Upload{}, "UploadReply": &UploadReply{}, "Artifact": &Artifact{},
		"Result": &Result{}, "ResultReply": &ResultReply{}, "Fail": &Fail{}, "Revoke": &Revoke{},
		"Control": &Control{}, "StepRequest": &StepRequest{}, "StepReply": &StepReply{},
		"AgentStatus": &AgentStatus{}, "Effect": &Effect{}, "EffectReply": &EffectReply{},
	}
}

// FuzzDecodeMessages decodes one body as every message type, as a receiver
// of that verb does (encoding/json, unknown fields ignored), and checks what
// each receiver goes on to do with an accepted body: validate its token and
// task, encode it again.
func FuzzDecodeMessages(f *testing.F) {
	tok := `{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3}`
	for _, s := range []string{
		`{"boot_id":"9f2c","version":"v1.0.0","devices":[{"serial":"R58M","state":"device","model":"Pixel 7","tags":["a"]}],"capabilities":["record"],"slots":2,"draining":true,"probe":true}`,
		`{"lease_ttl_ms":30000,"heartbeat_ms":5000,"server_time":"2026-03-01T12:00:00.25Z","upload_mode":"presigned","coordinator_id":"c1","settings":{"log_level":"debug"}}`,
		`{"boot_id":"b","running":[` + tok + `],"free":0}`,
		`{"token":` + tok + `,"lease_ttl_ms":30000,"task":{"device":{"serial":"R58M","tags":["x"]},"steps":[{"op":"launch","package":"com.x"},{"op":"tap","x":1,"y":2},{"op":"swipe","x":1,"y":2,"x2":3,"y2":4,"duration_ms":300},{"op":"text","text":"hi"},{"op":"key","key":"HOME"},{"op":"screenshot","name":"s.png"},{"op":"ui_dump","name":"u.xml"},{"op":"record_start"},{"op":"record_stop","name":"r.mp4"},{"op":"wait","duration_ms":10}]}}`,
		`{"token":` + tok + `,"task":{"interactive":true,"idle_timeout_ms":-1}}`,
		`{"token":` + tok + `,"task":{"steps":[{"op":"screenshot","name":"../x.png"}]}}`,
		`{"token":` + tok + `}`,
		`{"lease_ttl_ms":30000,"expires_at":"2026-03-01T12:00:30Z"}`,
		`{"token":` + tok + `,"name":"shot.png","size":5,"content_type":"image/png","sha256":"9d5ed678fe57bcca610140957afab571a3a2d3d5c0d4b3e5d6a1f3b2c9e8d7f6"}`,
		`{"key":"jobs/j/g1/x","url":"http://h/x?X-Amz-Signature=00","method":"PUT","headers":{"If-None-Match":"*"},"expires":"2026-03-01T12:15:00Z"}`,
		`{"token":` + tok + `,"name":"shot.png","key":"jobs/job-7f3a/g3/shot.png","size":5,"sha256":"00","content_type":"image/png","etag":"e"}`,
		`{"token":` + tok + `,"result":{"ok":true,"n":[1,2.5e3,null,"\u00e9"]}}`,
		`{"token":` + tok + `,"result":   [ 1 , 2 ] }`,
		`{"accepted":true,"manifest":["jobs/j/g1/a.png"]}`,
		`{"token":` + tok + `,"reason":"agent shutting down","requeue":true}`,
		`{"command":"config","job_id":"j","settings":{"log_level":""}}`,
		`{"token":` + tok + `,"step":{"op":"tap","x":5},"finish":true}`,
		`{"token":` + tok + `,"task":{"steps":[{"op":"tap","effect":{"key":"order-42"}},{"op":"text","text":"x","effect":{"key":"order-42"}},{"op":"screenshot","effect":{"key":"k"}},{"op":"key","effect":{"key":"edgecoord/outbox"}}]}}`,
		`{"token":` + tok + `,"action":"receipt","key":"order-42","step":3,"op":"tap","attempt":"a1","receipt":{"outcome":"ok","at":"2026-03-01T12:00:00Z","artifacts":["jobs/j/g1/a.png"]},"evidence":["k"]}`,
		`{"key":"order-42","state":"reserved","job_id":"j","owner":"a/b","generation":2,"receipt":null}`,
		`{"seq":1,"op":"tap","outcome":"ok","duration_ms":1.5,"artifacts":["a"],"finished":true,"manifest":["k"]}`,
		`{"agent_id":"a","connection":{"nats_connected":true,"last_hello":"2026-03-01T12:00:00Z"},"jobs":[{"token":` + tok + `,"leased":true}],"phones":[{"serial":"s","busy":true}],"recent_stops":[{"cause":"revoked","at":"2026-03-01T12:00:00Z"}]}`,
		`{"server_time":"0000-01-01T00:00:00Z"}`,
		`{"server_time":"9999-12-31T23:59:59.999999999+23:59"}`,
		`{"token":{"generation":1e400}}`,
		`{"ok":true,"ok":false}`,
		`{"steps":null,"token":null}`,
		"\xef\xbb\xbf{}", `null`, `[]`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, v := range messageTypes() {
			if json.Unmarshal(data, v) != nil {
				continue
			}
			checkAccepted(t, name, v)
			enc, err := json.Marshal(v)
			if err != nil {
				// Only a time the decoder read but the encoder refuses
				// may fail here (a year the offset pushes out of range).
				if strings.Contains(err.Error(), "Time.MarshalJSON") {
					continue
				}
				t.Fatalf("%s: encode what was decoded from %q: %v", name, data, err)
			}
			again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := json.Unmarshal(enc, again); err != nil {
				t.Fatalf("%s: decode own encoding %s: %v", name, enc, err)
			}
			enc2, err := json.Marshal(again)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("%s: encoding is not stable:\n%s\n%s (%v)", name, enc, enc2, err)
			}
		}
	})
}

// checkAccepted applies what a receiver does with a decoded message.
func checkAccepted(t *testing.T, name string, v any) {
	t.Helper()
	var toks []fencing.Token
	switch m := v.(type) {
	case *Assign:
		toks = append(toks, m.Token)
		checkTask(t, m.Task)
	case *StepRequest:
		toks = append(toks, m.Token)
		checkTask(t, Task{Steps: []Step{m.Step}})
	case *Renew:
		toks = append(toks, m.Token)
	case *Upload:
		toks = append(toks, m.Token)
		checkName(t, m.Name)
	case *Artifact:
		toks = append(toks, m.Token)
		checkName(t, m.Name)
	case *Result:
		toks = append(toks, m.Token)
		if len(m.Result) > 0 && !json.Valid(m.Result) {
			t.Fatalf("Result: decoded an invalid raw result %q", m.Result)
		}
	case *Fail:
		toks = append(toks, m.Token)
	case *Revoke:
		toks = append(toks, m.Token)
	case *Heartbeat:
		toks = append(toks, m.Running...)
	case *Effect:
		toks = append(toks, m.Token)
	case *EffectReply:
		tok := fencing.Token{JobID: m.JobID, Owner: m.Owner, Generation: m.Generation}
		if m.Holds(tok) != (m.State == EffectReserved) {
			t.Fatalf("EffectReply %+v: Holds(its own token) = %v", m, m.Holds(tok))
		}
	}
	for _, tok := range toks {
		if tok.Validate() != nil {
			continue
		}
		if tok.AgentID() == "" || tok.Generation < 1 {
			t.Fatalf("%s: Validate accepted token %#v", name, tok)
		}
		_ = tok.String()
	}
}

// checkTask checks that a task Validate accepts names only known steps and
// safe artifact names.
func checkTask(t *testing.T, task Task) {
	t.Helper()
	if task.Validate() != nil {
		return
	}
	if len(task.Steps) == 0 && !task.Interactive || task.IdleTimeoutMS < 0 {
		t.Fatalf("Validate accepted task %+v", task)
	}
	keys := map[string]bool{}
	for _, s := range task.Steps {
		switch s.Op {
		case OpLaunch, OpWait, OpTap, OpSwipe, OpText, OpKey, OpScreenshot, OpUIDump, OpRecordStart, OpRecordStop:
		default:
			t.Fatalf("Validate accepted op %q", s.Op)
		}
		if s.Op == OpLaunch && s.Package == "" {
			t.Fatalf("Validate accepted launch without package")
		}
		if (s.Op == OpText && s.Text == "") || (s.Op == OpKey && s.Key == "") {
			t.Fatalf("Validate accepted %s step without its %s", s.Op, s.Op)
		}
		if s.DurationMS < 0 || (s.Op == OpTap || s.Op == OpSwipe) && (s.X < 0 || s.Y < 0) || s.Op == OpSwipe && (s.X2 < 0 || s.Y2 < 0) {
			t.Fatalf("Validate accepted negative coordinates or duration in %+v", s)
		}
		if s.Name != "" {
			checkName(t, s.Name)
		}
		if s.Effect != nil {
			if ValidateEffectKey(s.Effect.Key) != nil || !slices.Contains(EffectOps, s.Op) || strings.HasPrefix(s.Effect.Key, ReservedKeyPrefix) {
				t.Fatalf("Validate accepted effect step %+v (key %q)", s, s.Effect.Key)
			}
			if keys[s.Effect.Key] {
				t.Fatalf("Validate accepted effect key %q twice", s.Effect.Key)
			}
			keys[s.Effect.Key] = true
		}
	}
}

// checkName checks that a name ValidateArtifactName accepts is one element
// of an object key: it cannot climb out of jobs/<job>/g<generation>/.
func checkName(t *testing.T, name string) {
	t.Helper()
	if ValidateArtifactName(name) != nil {
		return
	}
	if name == "" || name == "." || name == ".." || len(name) > 200 || strings.ContainsAny(name, "/\\\x00 ") {
		t.Fatalf("ValidateArtifactName accepted %q", name)
	}
	key := fencing.Token{JobID: "j", Owner: "a/b", Generation: 1}.ObjectKey(name)
	if !strings.HasPrefix(key, "jobs/j/g1/") || strings.Count(key, "/") != 3 {
		t.Fatalf("name %q gives key %q", name, key)
	}
}

// FuzzParseCoordSubject checks the coordinator's reading of the agent id
// from a subject: whatever it accepts is exactly one valid subject token at
// the fixed position, so NATS permissions on the subject bind the identity.
func FuzzParseCoordSubject(f *testing.F) {
	for _, s := range []string{
		"edge.v1.coord.pc-1.result", "edge.v1.coord.pc1", "edge.v2.coord.pc1.renew", "edge.v1.agent.pc1.renew",
		"edge.v1.coord.p*c.renew", "edge.v1.coord.*.renew", "edge.v1.coord.>.renew", "edge.v1.coord.a.b.c",
		"edge.v1.coord..renew", "edge.v1.coord.a.", "edge.v1.coord.a b.renew", "edge.v1.coord." + strings.Repeat("a", 65) + ".hello",
		"", ".", "....", "x.v1.coord.a.b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		agentID, verb, err := ParseCoordSubject(subj)
		if err != nil {
			if agentID != "" || verb != "" {
				t.Fatalf("ParseCoordSubject(%q) failed but returned %q, %q", subj, agentID, verb)
			}
			if strings.Contains(err.Error(), "%!") && !strings.Contains(subj, "%!") {
				t.Fatalf("malformed error %q", err)
			}
			return
		}
		if ValidateAgentID(agentID) != nil || strings.ContainsAny(agentID, ".*> \t\r\n") || agentID == "" || len(agentID) > 64 {
			t.Fatalf("ParseCoordSubject(%q) accepted agent id %q", subj, agentID)
		}
		if strings.Contains(verb, ".") {
			t.Fatalf("ParseCoordSubject(%q) accepted verb %q", subj, verb)
		}
		if got := CoordSubject(agentID, verb); got != subj {
			t.Fatalf("CoordSubject(ParseCoordSubject(%q)) = %q", subj, got)
		}
		if InboxPrefix(agentID) != "_INBOX."+agentID || AgentSubject(agentID, verb) != "edge.v1.agent."+agentID+"."+verb {
			t.Fatalf("subjects of %q", agentID)
		}
	})
}
