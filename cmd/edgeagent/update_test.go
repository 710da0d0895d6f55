//go:build linux

package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/agent/selfupdate"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/gobuild"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// releaseFiles serves release binaries by name, with Range requests (as
// a presigned URL of the bucket does), and counts the requests.
type releaseFiles struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newReleaseFiles(t *testing.T) *releaseFiles {
	r := &releaseFiles{files: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		b, ok := r.files[strings.TrimPrefix(req.URL.Path, "/")]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		http.ServeContent(w, req, "edgeagent", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// order serves body as name and returns the update order of a release of
// it with version v, signed with key.
func (r *releaseFiles) order(name string, body []byte, v string, key ed25519.PrivateKey) protocol.UpdateOrder {
	r.mu.Lock()
	r.files[name] = body
	r.mu.Unlock()
	return releaseOrder(body, v, key, r.srv.URL+"/"+name+"?X-Amz-Signature=presigned")
}

// releaseOrder is the update order of a release of body with version v,
// signed with key, to be downloaded from url.
func releaseOrder(body []byte, v string, key ed25519.PrivateKey, url string) protocol.UpdateOrder {
	rel := protocol.Release{Version: v, OS: runtime.GOOS, Arch: runtime.GOARCH, Size: int64(len(body)), SHA256: protocol.HexSHA256(sha256.Sum256(body))}
	rel.Sign(key)
	return protocol.UpdateOrder{Release: rel, URL: url, RolloutID: "r-" + v}
}

// agentWire records the hellos and heartbeats an agent sends the
// coordinator, as the coordinator receives them.
type agentWire struct {
	mu     sync.Mutex
	hellos []protocol.Hello
	beats  []protocol.Heartbeat
}

func watchAgent(t *testing.T, url, agentID string) *agentWire {
	nc, err := nats.Connect(url, nats.Name("update-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &agentWire{}
	for verb, f := range map[string]func([]byte){
		protocol.VerbHello: func(b []byte) {
			var h protocol.Hello
			if json.Unmarshal(b, &h) == nil {
				w.mu.Lock()
				w.hellos = append(w.hellos, h)
				w.mu.Unlock()
			}
		},
		protocol.VerbHeartbeat: func(b []byte) {
			var h protocol.Heartbeat
			if json.Unmarshal(b, &h) == nil {
				w.mu.Lock()
				w.beats = append(w.beats, h)
				w.mu.Unlock()
			}
		},
	} {
		if _, err := nc.Subscribe(protocol.CoordSubject(agentID, verb), func(m *nats.Msg) { f(m.Data) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitHello waits for a hello matching ok and returns the first.
func (w *agentWire) waitHello(t *testing.T, what string, ok func(protocol.Hello) bool) protocol.Hello {
	t.Helper()
	var found protocol.Hello
	testenv.Eventually(t, e2e.WaitTimeout, what, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, h := range w.hellos {
			if ok(h) {
				found = h
				return true
			}
		}
		return false
	})
	return found
}

// state reports whether the agent of boot reported the update state (in
// a hello or a heartbeat), and returns the status.
func (w *agentWire) state(boot, state string) (protocol.UpdateStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.hellos {
		if h.BootID == boot && h.Update != nil && h.Update.State == state {
			return *h.Update, true
		}
	}
	for _, h := range w.beats {
		if h.BootID == boot && h.Update != nil && h.Update.State == state {
			return *h.Update, true
		}
	}
	return protocol.UpdateStatus{}, false
}

// control sends a control command to the agent and returns the error of
// its reply (nil for an Ack).
func control(t *testing.T, url, agentID string, c protocol.Control) error {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("update-test-control"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data, _ := json.Marshal(c)
	m, err := nc.Request(protocol.AgentSubject(agentID, protocol.VerbControl), data, 10*time.Second)
	if err != nil {
		t.Fatalf("control %s: %v", c.Command, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return &controlError{code: code, desc: m.Header.Get("Nats-Service-Error")}
	}
	return nil
}

type controlError struct{ code, desc string }

func (e *controlError) Error() string { return e.code + " " + e.desc }

// wantFile fails the test with msg unless the file path holds want.
func wantFile(t *testing.T, path string, want []byte, msg string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("%s (%d bytes, %v)", msg, len(b), err)
	}
}

// agentBuilds returns the edgeagent binaries built as v1.0.0, v2.0.0 and
// v3.0.0, the last a bad release: it exits 1 at every start right after
// reading its update record (main.crashAfterUpdateRecord).
func agentBuilds(t *testing.T) (v1, v2, v3 []byte) {
	t.Helper()
	build := func(ldflags string) []byte {
		b, err := os.ReadFile(testenv.BinaryWith(t, "edgeagent", gobuild.Options{LDFlags: ldflags}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return build("-X main.version=v1.0.0"), build("-X main.version=v2.0.0"),
		build("-X main.version=v3.0.0 -X main.crashAfterUpdateRecord=1")
}

// updateConfig is the update block of an agent's config that trusts the
// release key pub.
func updateConfig(pub string) string {
	return "update:\n  public_key: " + pub + "\n  drain_timeout: 1m\n  health_timeout: 1m\n"
}

// TestSelfUpdate runs real edgeagent binaries built as v1.0.0, v2.0.0 and
// v3.0.0 under a supervisor that starts the binary again whenever it
// exits, as systemd does, against a coordinator:
//
//   - update to v2 while a job runs: the agent takes no new job, lets the
//     running job finish (one attempt, no lease lost), downloads and checks
//     the signed release, swaps it in (v1 kept as .prev), exits 75; the
//     supervisor starts v2, which says hello as v2.0.0, has it accepted and
//     reports done;
//   - a tampered binary (its SHA-256 is not the signed one) is refused
//     after the download, and a release signed by another key at once; the
//     agent keeps running v2 and takes jobs again;
//   - update to v3, a build that exits 1 at every start right after
//     reading the update record (main.crashAfterUpdateRecord, the crash of
//     a bad release): after two such starts the third puts v2 back itself
//     and exits 75, and v2 starts and reports rolled_back in its hello.
func TestSelfUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	v1, v2, v3 := agentBuilds(t)
	exe := filepath.Join(t.TempDir(), "edgeagent")
	if err := os.WriteFile(exe, v1, 0o755); err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	_, otherKey, _ := ed25519.GenerateKey(nil)

	// The lease is long enough that renewals answered late on a busy
	// machine do not end the job the update must wait for: the test is
	// about the drain, not about a lost lease.
	l := newLab(t, 6*time.Second)
	wire := watchAgent(t, l.env.NATSURL(), "pc-bin")
	a := l.env.NewAgent(e2e.AgentOptions{Extra: updateConfig(protocol.FormatReleaseKey(pub))})
	sup := e2e.Supervise(t, a.RunCommand(exe), e2e.SuperviseOptions{PreventExit: []int{2}})
	files := newReleaseFiles(t)
	url := l.env.NATSURL()

	h1 := wire.waitHello(t, "v1 to say hello", func(h protocol.Hello) bool { return h.Version == "v1.0.0" })

	// 1. v1 → v2 while a job runs, downloaded from a presigned URL of the
	// bucket, resuming a part file that holds its first half.
	mc := l.mio.Client(t)
	if _, err := mc.PutObject(l.ctx, l.mio.Bucket, "releases/edgeagent-v2.0.0", bytes.NewReader(v2), int64(len(v2)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	presigned, err := mc.PresignedGetObject(l.ctx, l.mio.Bucket, "releases/edgeagent-v2.0.0", 10*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	toV2 := releaseOrder(v2, "v2.0.0", key, presigned.String())
	partDir := filepath.Join(a.StateDir, agent.UpdateDir)
	if err := os.MkdirAll(partDir, 0o700); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(partDir, "edgeagent-v2.0.0-"+runtime.GOOS+"-"+runtime.GOARCH+"-"+toV2.Release.SHA256[:16]+".part")
	if err := os.WriteFile(part, v2[:len(v2)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	job := l.submit(t, wait(2000), screenshot)
	owner := l.leased(t, job)
	if err := control(t, url, "pc-bin", protocol.Control{Command: protocol.ControlUpdate, Update: &toV2}); err != nil {
		t.Fatalf("update to v2: %v", err)
	}
	p2 := sup.WaitStarts(t, 2)
	h2 := wire.waitHello(t, "v2 to say hello", func(h protocol.Hello) bool { return h.Version == "v2.0.0" })
	testenv.Eventually(t, 30*time.Second, "v2 to report the update done", func() bool {
		_, done := wire.state(h2.BootID, protocol.UpdateDone)
		return done
	})
	if exits := sup.Exits(); !slices.Equal(exits, []int{agent.ExitUpdate}) {
		t.Fatalf("exits %v, want [%d]: v1 exits for the update", exits, agent.ExitUpdate)
	}
	for _, s := range []string{protocol.UpdateDraining, protocol.UpdateDownloading, protocol.UpdateRestarting} {
		if st, ok := wire.state(h1.BootID, s); !ok || st.Target != "v2.0.0" || st.RolloutID != "r-v2.0.0" {
			t.Errorf("v1 did not report %s for v2.0.0 (%+v)", s, st)
		}
	}
	j, err := l.store.Get(l.ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobstore.StatusSucceeded || j.Attempts != 1 || len(j.AttemptEnds) != 0 || j.WorkerID != owner {
		t.Fatalf("job %s after %d attempts on %s, ends %+v: want SUCCEEDED in one attempt on %s", j.Status, j.Attempts, j.WorkerID, j.AttemptEnds, owner)
	}
	dl := sup.Processes()[0].Entries("update: downloading")
	if len(dl) != 1 || dl[0]["resume_from"] != float64(len(v2)/2) {
		t.Errorf("v1's downloads %v: want one, resuming at byte %d", dl, len(v2)/2)
	}
	wantFile(t, exe, v2, "the binary after the update is not v2")
	wantFile(t, exe+selfupdate.PrevSuffix, v1, "v1 is not kept as .prev")

	// 2. A tampered binary and a foreign signature are refused; v2 runs on.
	tampered := files.order("v3-tampered", v3, "v3.0.0", key)
	files.mu.Lock()
	bad := bytes.Clone(v3)
	bad[len(bad)/2] ^= 0xff
	files.files["v3-tampered"] = bad
	files.mu.Unlock()
	if err := control(t, url, "pc-bin", protocol.Control{Command: protocol.ControlUpdate, Update: &tampered}); err != nil {
		t.Fatalf("tampered update: %v (accepted until the download shows it)", err)
	}
	testenv.Eventually(t, 60*time.Second, "v2 to refuse the tampered binary", func() bool {
		st, ok := wire.state(h2.BootID, protocol.UpdateRefused)
		return ok && strings.Contains(st.Outcome, "SHA-256")
	})
	foreign := files.order("v3", v3, "v3.0.0", otherKey)
	if err := control(t, url, "pc-bin", protocol.Control{Command: protocol.ControlUpdate, Update: &foreign}); err == nil || !strings.Contains(err.Error(), "400 release signature does not verify") {
		t.Fatalf("update signed by another key: %v", err)
	}
	next := l.submit(t, screenshot)
	if j := l.ended(t, next, 30*time.Second); j.Status != jobstore.StatusSucceeded || !strings.HasPrefix(j.WorkerID, "pc-bin/"+h2.BootID) {
		t.Fatalf("job after the refusals: %s on %s (%s)", j.Status, j.WorkerID, j.FailReason)
	}
	if p2.Exited() || len(sup.Processes()) != 2 {
		t.Fatalf("v2 exited after a refused update (exits %v)", sup.Exits())
	}
	wantFile(t, exe, v2, "the binary changed after a refused update")

	// 3. v2 → v3, which crashes at every start: rolled back to v2.
	if err := control(t, url, "pc-bin", protocol.Control{Command: protocol.ControlUpdate, Update: new(files.order("v3", v3, "v3.0.0", key))}); err != nil {
		t.Fatalf("update to v3: %v", err)
	}
	p6 := sup.WaitStarts(t, 6)
	back := wire.waitHello(t, "v2 to start again and report the rollback in its hello", func(h protocol.Hello) bool {
		return h.Version == "v2.0.0" && h.Update != nil && h.Update.State == protocol.UpdateRolledBack
	})
	want := []int{agent.ExitUpdate, agent.ExitUpdate, 1, 1, agent.ExitUpdate}
	if exits := sup.Exits(); !slices.Equal(exits, want) {
		t.Fatalf("exits %v, want %v: v2 for the update, v3 crashing twice, v3 putting v2 back", exits, want)
	}
	if back.Update.Target != "v3.0.0" || !strings.Contains(back.Update.Outcome, "v3.0.0 started 2 times without its hello being accepted") {
		t.Errorf("rolled back: %+v", back.Update)
	}
	if p6.Exited() {
		t.Fatalf("v2 exited after the rollback (exits %v)", sup.Exits())
	}
	wantFile(t, exe, v2, "the binary after the rollback is not v2")
	if code := sup.Stop(t); code != 0 {
		t.Fatalf("v2 exited %d after SIGTERM", code)
	}
}
