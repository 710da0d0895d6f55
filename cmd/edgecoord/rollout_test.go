package main

import (
	"debug/elf"
	"debug/pe"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// releaseLab is the real edgecoord with its API and storage on the Env's
// PostgreSQL and MinIO, an admin token, and the CLI pointed at it.
type releaseLab struct {
	env  *e2e.Env
	c    *e2e.Coordinator
	tok  string
	dir  string
	http *http.Client
}

func startReleaseLab(t *testing.T) *releaseLab {
	t.Helper()
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "rollout", API: true, Storage: true})
	return &releaseLab{env: env, c: c, tok: c.Token(t, "ops", "lab", "read,admin"), dir: t.TempDir(), http: apitest.Client(t)}
}

// cli runs edgecoord with the lab's API and token.
func (l *releaseLab) cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"), Args: append(args, "--api", l.c.Base),
		Env: []string{"EDGECOORD_API_TOKEN=" + l.tok}})
}

// file writes a file of the lab's directory.
func (l *releaseLab) file(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(l.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// get GETs an API path through the client that checks every exchange
// against docs/openapi.yaml.
func (l *releaseLab) get(t *testing.T, path string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, l.c.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.tok)
	resp, err := l.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// status is rollout status --json.
func (l *releaseLab) status(t *testing.T) api.RolloutView {
	t.Helper()
	out, errOut, code := l.cli(t, "rollout", "status", "--json")
	var v api.RolloutView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("rollout status --json: exit %d, %v: %s %s", code, err, out, errOut)
	}
	return v
}

func agentState(v api.RolloutView, id string) api.RolloutAgentView {
	for _, a := range v.AgentStates {
		if a.ID == id {
			return a
		}
	}
	return api.RolloutAgentView{}
}

// keygen makes a release key with the CLI and returns the private key
// file and the public key.
func (l *releaseLab) keygen(t *testing.T) (string, string) {
	t.Helper()
	key := filepath.Join(l.dir, "release.key")
	out, errOut, code := e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"), Args: []string{"release", "keygen", "-o", key}})
	pub := strings.TrimSpace(out)
	if _, err := protocol.ParseReleaseKey(pub); code != 0 || err != nil || !strings.Contains(errOut, "update.public_key") {
		t.Fatalf("release keygen: exit %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the private key file: %v, %v; want mode 0600", fi, err)
	}
	return key, pub
}

// TestReleaseAddBinary: release keygen writes a private key only its owner
// reads and prints the public key; release add reads each binary's OS and
// architecture from its headers, signs it and stores it in the bucket
// under releases/<version>/<os>-<arch>/; release list shows them. A
// version that is none, a key file of another format (the public key
// among them), a file that is no binary and another binary for a version,
// OS and architecture stored already are refused with exit 2, storing
// nothing; the same binary again is accepted as stored already.
func TestReleaseAddBinary(t *testing.T) {
	l := startReleaseLab(t)
	key, pub := l.keygen(t)
	if _, _, code := e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"), Args: []string{"release", "keygen", "-o", key}}); code != 2 {
		t.Fatalf("keygen over an existing key: exit %d, want 2", code)
	}
	linux := l.file(t, "edgeagent-linux-amd64", fakeELF(elf.EM_X86_64, elf.ELFOSABI_NONE, "v1.1.0 linux amd64"))
	arm := l.file(t, "edgeagent-linux-arm64", fakeELF(elf.EM_AARCH64, elf.ELFOSABI_NONE, "v1.1.0 linux arm64"))
	win := l.file(t, "edgeagent.exe", fakePE(pe.IMAGE_FILE_MACHINE_AMD64, "v1.1.0 windows amd64"))
	script := l.file(t, "install.sh", []byte("#!/bin/sh\necho not a binary\n"))
	pubFile := l.file(t, "release.pub", []byte(pub+"\n"))
	garbage := l.file(t, "garbage.key", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"))
	for _, u := range []struct {
		args []string
		want string
	}{
		{[]string{"release", "add", "--version", "1.1", "--sign", key, linux}, "--version: "},
		{[]string{"release", "add", "--version", "v1.1.0", "--sign", garbage, linux}, "unknown key file format"},
		{[]string{"release", "add", "--version", "v1.1.0", "--sign", pubFile, linux}, "is a public key"},
		{[]string{"release", "add", "--version", "v1.1.0", "--sign", key, linux, script}, "not an executable"},
		{[]string{"release", "add", "--version", "v1.1.0", linux}, "--sign KEY is required"},
		{[]string{"release", "add", "--version", "v1.1.0", "--sign", key}, "FILE"},
	} {
		if _, errOut, code := l.cli(t, u.args...); code != 2 || !strings.Contains(errOut, u.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", u.args, code, errOut, u.want)
		}
	}
	var none api.ReleaseList
	if l.get(t, "/api/v1/releases", &none); len(none.Releases) != 0 {
		t.Fatalf("refused adds stored %+v", none.Releases)
	}

	out, errOut, code := l.cli(t, "release", "add", "--version", "1.1.0", "--sign", key, linux, arm, win)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "v1.1.0 windows/amd64 ") || !strings.Contains(errOut, "stored") {
		t.Fatalf("release add: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var list api.ReleaseList
	l.get(t, "/api/v1/releases", &list)
	pk, _ := protocol.ParseReleaseKey(pub)
	if len(list.Releases) != 3 {
		t.Fatalf("releases: %+v", list.Releases)
	}
	mio := l.env.MinIO()
	for _, r := range list.Releases {
		if err := r.Verify(pk); err != nil || r.Version != "v1.1.0" || r.AddedBy != "ops" {
			t.Errorf("release %+v: %v", r, err)
		}
		obj := jobstore.ReleaseObjectKey(r.Version, r.OS, r.Arch)
		st, err := mio.Client(t).StatObject(t.Context(), mio.Bucket, obj, minio.StatObjectOptions{})
		if err != nil || st.Size != r.Size {
			t.Errorf("object %s: %+v, %v", obj, st, err)
		}
	}
	if !strings.HasSuffix(jobstore.ReleaseObjectKey("v1.1.0", "windows", "amd64"), "/windows-amd64/edgeagent.exe") {
		t.Errorf("windows object key %s", jobstore.ReleaseObjectKey("v1.1.0", "windows", "amd64"))
	}
	for obj := range mio.Client(t).ListObjects(t.Context(), mio.Bucket, minio.ListObjectsOptions{Prefix: "releases/incoming/", Recursive: true}) {
		t.Errorf("left under releases/incoming/: %s", obj.Key)
	}

	if _, errOut, code := l.cli(t, "release", "add", "--version", "v1.1.0", "--sign", key, linux); code != 0 || !strings.Contains(errOut, "was stored already") {
		t.Fatalf("the same binary again: exit %d, stderr %q", code, errOut)
	}
	rebuilt := l.file(t, "edgeagent-linux-amd64-rebuilt", fakeELF(elf.EM_X86_64, elf.ELFOSABI_NONE, "v1.1.0 linux amd64, built again"))
	if _, errOut, code := l.cli(t, "release", "add", "--version", "v1.1.0", "--sign", key, rebuilt); code != 2 || !strings.Contains(errOut, "stored already with sha256") {
		t.Fatalf("another binary for v1.1.0 linux/amd64: exit %d, stderr %q", code, errOut)
	}
	out, _, code = l.cli(t, "release", "list")
	if code != 0 || strings.Count(out, "v1.1.0") != 3 || !strings.Contains(out, "linux/arm64") {
		t.Fatalf("release list: exit %d: %s", code, out)
	}
}

// TestRolloutBinary: a rollout moves through its steps: with steps
// 25%,100% over the three agents pc-* selects that update (pc-4 opted
// out and shows as lagging, lab-1 is not selected), one agent is told to
// update first and no other until it said hello with the new version;
// then the rest, and the rollout completes. Each order carries the
// signed release for the agent's platform and a presigned URL its binary
// downloads from intact. A rollout whose agents fail (one rolls back, one
// never comes back) pauses after --max-failures, resumes and aborts; a
// rollout of a version no release is stored of is refused (exit 2). An
// agent on a newer version is left alone unless the rollout allows a
// downgrade, then told to go back with the order saying so. Two
// coordinators run the rollout loop on the same database all along, and
// each agent gets each order once.
func TestRolloutBinary(t *testing.T) {
	t.Parallel() // its servers, agents and browser are its own
	l := startReleaseLab(t)
	l.env.StartCoordinator(e2e.CoordinatorOptions{ID: "rollout-2", Storage: true})
	key, pub := l.keygen(t)
	pk, _ := protocol.ParseReleaseKey(pub)
	for _, v := range []string{"v1.1.0", "v1.2.0"} {
		linux := l.file(t, "edgeagent-"+v, fakeELF(elf.EM_X86_64, elf.ELFOSABI_NONE, v+" linux amd64"))
		arm := l.file(t, "edgeagent-arm-"+v, fakeELF(elf.EM_AARCH64, elf.ELFOSABI_NONE, v+" linux arm64"))
		if _, errOut, code := l.cli(t, "release", "add", "--version", v, "--sign", key, linux, arm); code != 0 {
			t.Fatalf("release add %s: exit %d: %s", v, code, errOut)
		}
	}
	if _, errOut, code := l.cli(t, "rollout", "start", "v9.9.9"); code != 2 || !strings.Contains(errOut, "no release v9.9.9") {
		t.Fatalf("a rollout of an unknown version: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := l.cli(t, "rollout", "start", "v1.1.0", "--steps", "50%,25%"); code != 2 || !strings.Contains(errOut, "steps[1]") {
		t.Fatalf("steps that do not ascend: exit %d, stderr %q", code, errOut)
	}

	// Version 1.2.0 fails on pc-1 (rolled back) and pc-2 (never back).
	fail := map[string]string{"pc-1": protocol.UpdateRolledBack, "pc-2": "silent"}
	agents := map[string]*e2e.UpdateAgent{}
	for _, id := range []string{"pc-1", "pc-2", "pc-3", "pc-4", "lab-1"} {
		platform := "linux/amd64"
		if id == "pc-3" {
			platform = "linux/arm64"
		}
		agents[id] = l.env.StartUpdateAgent(e2e.UpdateAgentOptions{ID: id, Version: "v1.0.0", Platform: platform, PublicKey: pk,
			OptedOut: id == "pc-4", OnUpdate: func(o protocol.UpdateOrder) string {
				if o.Release.Version == "v1.2.0" {
					return fail[id]
				}
				return ""
			}})
	}
	agents["pc-1"].Hold()
	out, errOut, code := l.cli(t, "rollout", "start", "v1.1.0", "--agents", "pc-*", "--steps", "25%,100%")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "ro-") {
		t.Fatalf("rollout start: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	first := strings.TrimSpace(out)
	if _, errOut, code := l.cli(t, "rollout", "start", "v1.2.0"); code == 0 || !strings.Contains(errOut, "another rollout") {
		t.Fatalf("a second rollout while one runs: exit %d, stderr %q", code, errOut)
	}

	// Step 1: one of the three agents, held before it comes back.
	testenv.Eventually(t, e2e.WaitTimeout, "pc-1 told to update", func() bool { return len(agents["pc-1"].Orders()) == 1 })
	v := l.status(t)
	if v.ID != first || v.Step != 0 || v.Eligible != 3 || agentState(v, "pc-1").Status != jobstore.RolloutAgentUpdating ||
		agentState(v, "pc-2").Status != "pending" || agentState(v, "pc-4").Status != "lagging" || agentState(v, "lab-1").ID != "" {
		t.Fatalf("during step 1: %+v", v)
	}
	o := agents["pc-1"].Orders()[0]
	if o.RolloutID != first || o.Release.Version != "v1.1.0" || o.Release.OS != "linux" || o.Release.Arch != "amd64" || o.Release.Verify(pk) != nil {
		t.Fatalf("pc-1's order: %+v", o)
	}
	if st := agents["pc-1"].Status(); st.State != protocol.UpdateDownloading {
		t.Fatalf("pc-1 checked its download: %+v, want it downloading (held) rather than refused", st)
	}
	if n := len(agents["pc-2"].Orders()) + len(agents["pc-3"].Orders()); n != 0 {
		t.Fatalf("%d orders to pc-2 and pc-3 while step 1 is under way", n)
	}
	agents["pc-1"].Release()

	// Step 2: the other two, then the rollout completes.
	testenv.Eventually(t, e2e.WaitTimeout, "rollout "+first+" completed", func() bool { return l.status(t).State == jobstore.RolloutCompleted })
	v = l.status(t)
	for _, id := range []string{"pc-1", "pc-2", "pc-3"} {
		a := agentState(v, id)
		if a.Status != jobstore.RolloutAgentDone || a.Version != "v1.1.0" || agents[id].Version() != "v1.1.0" || a.Update == nil || a.Update.State != protocol.UpdateDone {
			t.Errorf("%s after the rollout: %+v (update %+v)", id, a, a.Update)
		}
		if a.Order == nil || a.Order.Step != map[string]int{"pc-1": 0, "pc-2": 1, "pc-3": 1}[id] {
			t.Errorf("%s was told in step %+v", id, a.Order)
		}
	}
	if o := agents["pc-3"].Orders(); len(o) != 1 || o[0].Release.Arch != "arm64" {
		t.Errorf("pc-3 (linux/arm64) got %+v, want the arm64 binary", o)
	}
	for _, id := range []string{"pc-1", "pc-2", "pc-3"} {
		if n := len(agents[id].Orders()); n != 1 {
			t.Errorf("%s got %d orders, want one", id, n)
		}
	}
	if a := agentState(v, "pc-4"); a.Status != "lagging" || a.Version != "v1.0.0" || len(agents["pc-4"].Orders()) != 0 {
		t.Errorf("pc-4 (opted out): %+v", a)
	}
	if len(agents["lab-1"].Orders()) != 0 {
		t.Error("lab-1, which the selector does not match, was told to update")
	}
	out, _, code = l.cli(t, "rollout", "status")
	if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "lagging") || !strings.Contains(out, "pc-3") {
		t.Fatalf("rollout status: exit %d: %s", code, out)
	}
	var shown api.RolloutView
	l.get(t, "/api/v1/rollouts/"+first, &shown)
	var rollouts api.RolloutList
	if l.get(t, "/api/v1/rollouts", &rollouts); len(rollouts.Rollouts) != 1 || shown.Counts[jobstore.RolloutAgentDone] != 3 {
		t.Fatalf("rollouts %+v, counts %+v", rollouts.Rollouts, shown.Counts)
	}

	// v1.2.0 fails on two agents: the rollout pauses after two failures.
	out, errOut, code = l.cli(t, "rollout", "start", "v1.2.0", "--agents", "pc-*", "--steps", "100%", "--max-failures", "2", "--timeout", "3s")
	if code != 0 {
		t.Fatalf("rollout start v1.2.0: exit %d: %s", code, errOut)
	}
	second := strings.TrimSpace(out)
	testenv.Eventually(t, e2e.WaitTimeout, "rollout "+second+" paused", func() bool { return l.status(t).State == jobstore.RolloutPaused })
	v = l.status(t)
	if !strings.Contains(v.Reason, "2 agents failed") || agentState(v, "pc-3").Status != jobstore.RolloutAgentDone {
		t.Fatalf("paused: %+v", v)
	}
	if a := agentState(v, "pc-1"); a.Status != jobstore.RolloutAgentFailed || !strings.Contains(a.LastOutcome, protocol.UpdateRolledBack) || a.Version != "v1.1.0" {
		t.Errorf("pc-1 (rolled back): %+v", a)
	}
	if a := agentState(v, "pc-2"); a.Status != jobstore.RolloutAgentFailed || !strings.Contains(a.LastOutcome, "did not come back") {
		t.Errorf("pc-2 (never back): %+v", a)
	}
	for _, id := range []string{"pc-1", "pc-2", "pc-3"} {
		if o := agents[id].Orders(); len(o) != 2 || o[1].Release.Version != "v1.2.0" || o[1].RolloutID != second {
			t.Errorf("%s got orders %+v, want one of each rollout", id, o)
		}
	}
	out, _, code = l.cli(t, "rollout", "status")
	if code != 0 || !strings.Contains(out, "paused") || !strings.Contains(out, "rolled_back") {
		t.Fatalf("rollout status of the paused rollout: exit %d: %s", code, out)
	}
	if out, errOut, code := l.cli(t, "rollout", "resume"); code != 0 || !strings.Contains(out, "running") {
		t.Fatalf("rollout resume: exit %d: %s %s", code, out, errOut)
	}
	// Every agent of the resumed rollout has ended, so the coordinators'
	// next pass (within a second) completes it; on a loaded machine that
	// pass can come before the next command.
	switch out, errOut, code := l.cli(t, "rollout", "pause", second); {
	case code == 0 && strings.Contains(out, "paused"):
		if out, errOut, code := l.cli(t, "rollout", "abort"); code != 0 || !strings.Contains(out, "aborted") {
			t.Fatalf("rollout abort: exit %d: %s %s", code, out, errOut)
		}
		if _, errOut, code := l.cli(t, "rollout", "abort", second); code != 1 || !strings.Contains(errOut, "no rollout is running or paused") && !strings.Contains(errOut, "is aborted") {
			t.Fatalf("abort of an aborted rollout: exit %d: %s", code, errOut)
		}
		if v := l.status(t); v.State != jobstore.RolloutAborted || !strings.Contains(v.Reason, "ops") {
			t.Fatalf("after abort: %+v", v.Rollout)
		}
	case code == 1 && strings.Contains(errOut, "is completed"):
		t.Logf("the resumed rollout completed before the pause: %s", strings.TrimSpace(errOut))
		if _, errOut, code := l.cli(t, "rollout", "abort"); code != 1 || !strings.Contains(errOut, "no rollout is running or paused") {
			t.Fatalf("abort with no rollout running: exit %d: %s", code, errOut)
		}
		if v := l.status(t); v.State != jobstore.RolloutCompleted {
			t.Fatalf("after the refused pause: %+v", v.Rollout)
		}
	default:
		t.Fatalf("rollout pause: exit %d: %s %s", code, out, errOut)
	}

	// pc-3 runs v1.2.0 now: a rollout of v1.1.0 leaves it alone (newer)
	// and completes, the others being on v1.1.0; with --allow-downgrade
	// it is told to go back, and does.
	if _, errOut, code := l.cli(t, "rollout", "start", "v1.1.0", "--agents", "pc-*"); code != 0 {
		t.Fatalf("rollout start v1.1.0 again: exit %d: %s", code, errOut)
	}
	testenv.Eventually(t, e2e.WaitTimeout, "the rollout without downgrades completed", func() bool { return l.status(t).State == jobstore.RolloutCompleted })
	if a := agentState(l.status(t), "pc-3"); a.Status != "newer" || len(agents["pc-3"].Orders()) != 2 {
		t.Fatalf("pc-3 on v1.2.0 without --allow-downgrade: %+v, %d orders", a, len(agents["pc-3"].Orders()))
	}
	if _, errOut, code := l.cli(t, "rollout", "start", "v1.1.0", "--agents", "pc-*", "--allow-downgrade"); code != 0 {
		t.Fatalf("rollout start --allow-downgrade: exit %d: %s", code, errOut)
	}
	testenv.Eventually(t, e2e.WaitTimeout, "the downgrade completed", func() bool { return l.status(t).State == jobstore.RolloutCompleted })
	if o := agents["pc-3"].Orders(); len(o) != 3 || !o[2].AllowDowngrade || agents["pc-3"].Version() != "v1.1.0" {
		t.Fatalf("pc-3's orders %+v, version %s; want a third allowing the downgrade", o, agents["pc-3"].Version())
	}
}
