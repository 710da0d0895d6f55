package agent_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/agent/selfupdate"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// updateAgent starts an agent of version v2.0.0 whose binary is a file in a
// temporary directory, with self-updates configured by u (its Executable
// and the state directory filled in).
func (s *system) updateAgent(id string, u agent.UpdateOptions) (*agent.Agent, string) {
	s.t.Helper()
	dir := s.t.TempDir()
	exe := filepath.Join(dir, "edgeagent")
	if err := os.WriteFile(exe, []byte("v2 binary"), 0o755); err != nil {
		s.t.Fatal(err)
	}
	u.Executable = exe
	a, _ := s.startAgentWith(id, agentSetup{tweak: func(o *agent.Options) {
		o.Version, o.StateDir, o.Update = "v2.0.0", s.t.TempDir(), u
	}})
	// The agent subscribes to its control subject before it says hello:
	// once its hello is accepted, a control command finds it.
	testenv.Eventually(s.t, 20*time.Second, "agent "+id+"'s hello to be accepted", func() bool {
		return a.Status().Connection.HelloAccepted
	})
	return a, exe
}

// sendUpdate sends the control command update and returns the reply's
// error code and description ("" for an Ack).
func (s *system) sendUpdate(id string, o *protocol.UpdateOrder) (code, desc string) {
	s.t.Helper()
	data, _ := json.Marshal(protocol.Control{Command: protocol.ControlUpdate, Update: o})
	m, err := s.conn("ctl-"+id).Request(protocol.AgentSubject(id, protocol.VerbControl), data, 5*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	return m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error")
}

func signedOrder(body []byte, v string, key ed25519.PrivateKey, url string) protocol.UpdateOrder {
	rel := protocol.Release{Version: v, OS: runtime.GOOS, Arch: runtime.GOARCH, Size: int64(len(body)), SHA256: protocol.HexSHA256(sha256.Sum256(body))}
	rel.Sign(key)
	return protocol.UpdateOrder{Release: rel, URL: url}
}

// TestUpdateRefused: an update the agent must not carry out is answered
// with a refusal naming why, and reported as the update state (opted_out
// with update.auto false, refused otherwise); nothing is downloaded and
// the agent keeps taking jobs.
func TestUpdateRefused(t *testing.T) {
	s := newSystem(t, 2*time.Second)
	pub, key, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	body := []byte("v3 binary")
	order := func(f func(*protocol.UpdateOrder)) *protocol.UpdateOrder {
		o := signedOrder(body, "v3.0.0", key, srv.URL+"/v3")
		if f != nil {
			f(&o)
			if o.Release.Signature == "" {
				o.Release.Sign(key)
			}
		}
		return &o
	}
	resign := func(f func(*protocol.Release)) func(*protocol.UpdateOrder) {
		return func(o *protocol.UpdateOrder) { f(&o.Release); o.Release.Signature = "" }
	}
	optedOut, _ := s.updateAgent("pc-optout", agent.UpdateOptions{Auto: false, PublicKey: pub})
	noKey, _ := s.updateAgent("pc-nokey", agent.UpdateOptions{Auto: true})
	a, exe := s.updateAgent("pc-upd", agent.UpdateOptions{Auto: true, PublicKey: pub})
	for _, c := range []struct {
		name, agentID string
		a             *agent.Agent
		order         *protocol.UpdateOrder
		code, state   string
		why           string
	}{
		{"no release", "pc-upd", a, nil, "400", "", "carries no release"},
		{"update.auto false", "pc-optout", optedOut, order(nil), "403", protocol.UpdateOptedOut, "update.auto is false"},
		{"no public key", "pc-nokey", noKey, order(nil), "403", protocol.UpdateRefused, "no update.public_key"},
		{"other OS", "pc-upd", a, order(resign(func(r *protocol.Release) { r.OS = "plan9" })), "400", protocol.UpdateRefused, "release for plan9/"},
		{"other arch", "pc-upd", a, order(resign(func(r *protocol.Release) { r.Arch = "mips" })), "400", protocol.UpdateRefused, "/mips: this agent runs on"},
		{"bad version", "pc-upd", a, order(resign(func(r *protocol.Release) { r.Version = "3.0" })), "400", protocol.UpdateRefused, "release.version:"},
		{"same version", "pc-upd", a, order(resign(func(r *protocol.Release) { r.Version = "v2.0.0" })), "400", protocol.UpdateRefused, "already running v2.0.0"},
		{"downgrade", "pc-upd", a, order(resign(func(r *protocol.Release) { r.Version = "v1.9.9" })), "400", protocol.UpdateRefused, "a downgrade needs allow_downgrade"},
		{"other key", "pc-upd", a, func() *protocol.UpdateOrder { o := signedOrder(body, "v3.0.0", other, srv.URL+"/v3"); return &o }(), "400", protocol.UpdateRefused, "signature does not verify"},
		{"allowed downgrade, tampered signature", "pc-upd", a, order(func(o *protocol.UpdateOrder) {
			o.AllowDowngrade = true
			o.Release.Version = "v1.9.9" // signed as v3.0.0
		}), "400", protocol.UpdateRefused, "signature does not verify"},
		{"not a URL", "pc-upd", a, order(func(o *protocol.UpdateOrder) { o.URL = "file:///etc/passwd" }), "400", protocol.UpdateRefused, "url: not an http(s) URL"},
	} {
		code, desc := s.sendUpdate(c.agentID, c.order)
		if code != c.code || !strings.Contains(desc, c.why) {
			t.Errorf("%s: reply %s %q, want %s with %q", c.name, code, desc, c.code, c.why)
			continue
		}
		if c.state == "" {
			continue
		}
		if st := c.a.Status().Update; st == nil || st.State != c.state || !strings.Contains(st.Outcome, c.why) {
			t.Errorf("%s: update state in the status document %+v, want %s with %q", c.name, st, c.state, c.why)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d downloads for refused updates", n)
	}
	if b, _ := os.ReadFile(exe); string(b) != "v2 binary" {
		t.Errorf("binary changed to %q", b)
	}
	j, err := s.store.Submit(s.ctx, jobstore.JobSpec{Task: protocol.Task{Device: protocol.DeviceSelector{Serial: "sim-pc-upd"}, Steps: []protocol.Step{{Op: protocol.OpScreenshot}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.waitJob(j.ID, func(j jobstore.Job) bool { return j.Status == jobstore.StatusSucceeded }, "a job to run after the refusals")
}

// TestUpdateHandsBackAndResumes: a job that outlasts update.drain_timeout
// is handed back (cause agent_update: queued again at once); a download
// that is not the release (larger than its size) is refused, nothing is
// swapped, and the agent takes jobs again: the
// handed-back job runs to its end on its second attempt.
func TestUpdateHandsBackAndResumes(t *testing.T) {
	s := newSystem(t, 2*time.Second)
	pub, key, _ := ed25519.GenerateKey(nil)
	body := []byte("v3 binary")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat(body, 100)) // more than the release's size
	}))
	defer srv.Close()
	a, exe := s.updateAgent("pc-upd", agent.UpdateOptions{Auto: true, PublicKey: pub, DrainTimeout: 300 * time.Millisecond})
	j, err := s.store.Submit(s.ctx, jobstore.JobSpec{Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait, DurationMS: 3000}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.waitJob(j.ID, func(j jobstore.Job) bool { return j.Status == jobstore.StatusInProgress }, "the job to run")
	o := signedOrder(body, "v3.0.0", key, srv.URL+"/v3")
	if code, desc := s.sendUpdate("pc-upd", &o); code != "" {
		t.Fatalf("update: %s %s", code, desc)
	}
	testenv.Eventually(t, 20*time.Second, "the update to be refused after the download", func() bool {
		st := a.UpdateStatus()
		return st != nil && st.State == protocol.UpdateRefused
	})
	if st := a.UpdateStatus(); !strings.Contains(st.Outcome, "not the signed release") || st.Target != "v3.0.0" {
		t.Errorf("refused: %+v", st)
	}
	done := s.waitJob(j.ID, func(j jobstore.Job) bool { return jobstore.Finished(j.Status) }, "the handed-back job to end")
	if done.Status != jobstore.StatusSucceeded || done.Attempts != 2 || len(done.AttemptEnds) != 1 ||
		done.AttemptEnds[0].Cause != protocol.CauseAgentUpdate || done.AttemptEnds[0].Class != protocol.FailClassInfrastructure {
		t.Fatalf("job %s, %d attempts, ends %+v: want SUCCEEDED on the second attempt after an agent_update hand-back", done.Status, done.Attempts, done.AttemptEnds)
	}
	if b, _ := os.ReadFile(exe); string(b) != "v2 binary" {
		t.Errorf("binary changed to %q", b)
	}
	for _, f := range []string{exe + selfupdate.NewSuffix, exe + selfupdate.PrevSuffix} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("a refused update left %s", filepath.Base(f))
		}
	}
}

// trialAgent returns the options of an agent v2.0.0 on trial after an
// update from v1.0.0 (as selfupdate.Begin leaves it at its first start),
// its binary beside v1 kept as .prev, and the binary's path.
func trialAgent(t *testing.T, deadline time.Time) (agent.UpdateOptions, string, string) {
	dir, state := t.TempDir(), t.TempDir()
	exe := filepath.Join(dir, "edgeagent")
	for p, b := range map[string]string{exe: "v2 binary", exe + selfupdate.PrevSuffix: "v1 binary"} {
		if err := os.WriteFile(p, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rec := selfupdate.Record{State: protocol.UpdateRestarting, From: "v1.0.0", Target: "v2.0.0", Starts: 1, HealthDeadlineUnixMilli: deadline.UnixMilli()}
	if err := selfupdate.SaveRecord(state, rec); err != nil {
		t.Fatal(err)
	}
	return agent.UpdateOptions{Auto: true, Executable: exe, Trial: selfupdate.Trial{Record: rec, OnTrial: true, Deadline: deadline}}, exe, state
}

// TestUpdateTrial: a new binary on trial whose hello the coordinator
// accepts records the update done and runs on; one that gets no hello
// accepted by the deadline (no coordinator answers) puts the previous
// binary back, records rolled_back and Run returns ErrUpdateRestart.
func TestUpdateTrial(t *testing.T) {
	t.Run("hello accepted", func(t *testing.T) {
		s := newSystem(t, 2*time.Second)
		u, exe, state := trialAgent(t, time.Now().Add(time.Minute))
		a, _ := s.startAgentWith("pc-new", agentSetup{tweak: func(o *agent.Options) {
			o.Version, o.StateDir, o.Update = "v2.0.0", state, u
		}})
		testenv.Eventually(t, 20*time.Second, "the update to be done", func() bool {
			st := a.UpdateStatus()
			return st != nil && st.State == protocol.UpdateDone
		})
		r, _, err := selfupdate.LoadRecord(state)
		if err != nil || r.State != protocol.UpdateDone || r.Outcome != "updated from v1.0.0 to v2.0.0" {
			t.Fatalf("record %+v, %v", r, err)
		}
		if b, _ := os.ReadFile(exe); string(b) != "v2 binary" {
			t.Fatalf("binary %q after a passed trial", b)
		}
	})
	t.Run("no hello accepted", func(t *testing.T) {
		ns := testenv.NATS(t)
		nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-new")))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		u, exe, state := trialAgent(t, time.Now().Add(500*time.Millisecond))
		inv := capture.NewInventory()
		a, err := agent.New(agent.Options{AgentID: "pc-new", Version: "v2.0.0", Conn: nc, Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}),
			Store: &memStore{}, RequestTimeout: 100 * time.Millisecond, StateDir: state, Update: u,
			Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Run(t.Context()); !errors.Is(err, agent.ErrUpdateRestart) {
			t.Fatalf("Run: %v, want ErrUpdateRestart", err)
		}
		if b, _ := os.ReadFile(exe); string(b) != "v1 binary" {
			t.Fatalf("binary %q after a failed trial, want v1 back", b)
		}
		r, _, err := selfupdate.LoadRecord(state)
		if err != nil || r.State != protocol.UpdateRolledBack || !strings.Contains(r.Outcome, "within update.health_timeout: v1.0.0 was put back") {
			t.Fatalf("record %+v, %v", r, err)
		}
	})
}
