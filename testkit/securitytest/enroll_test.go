package securitytest

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/natsauth"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// docCommands returns the command lines of the first sh block of the
// docs/operations.md section with that heading.
func docCommands(t *testing.T, heading string) [][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no section %q", heading)
	}
	if next := regexp.MustCompile(`\n#{1,3} `).FindStringIndex(section); next != nil {
		section = section[:next[0]]
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("docs/operations.md %q has no sh block", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	var out [][]string
	for line := range strings.SplitSeq(block, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, strings.Fields(line))
		}
	}
	return out
}

// substitute replaces the placeholders of a documented command line.
func substitute(line []string, subs map[string]string) []string {
	out := make([]string, len(line))
	for i, w := range line {
		if v, ok := subs[w]; ok {
			w = v
		}
		out[i] = w
	}
	return out
}

// TestEnrollAndRevokeBinaries runs the documented commands of
// docs/operations.md ("NATS identities from the coordinator", "Add a PC",
// "Retire a PC") with the real binaries on an embedded NATS server started
// in operator mode from the include `edgecoord nats init` wrote: two PCs
// are enrolled with codes, with no edit or reload of the server's config;
// a reused and an expired code are refused (exit 2, nothing written); the
// enrolled users hold each agent to its own subjects (the identity cases
// of TestAgentPermissionsBeyondOwnSubjects); each agent runs a job on its
// fake phone; `edgecoord agent revoke` disconnects B within 5 s, refuses
// its next connect, and its running job is retried on A.
func TestEnrollAndRevokeBinaries(t *testing.T) {
	setup, add, retire := docCommands(t, "### NATS identities from the coordinator"), docCommands(t, "### Add a PC"), docCommands(t, "### Retire a PC")
	for _, c := range []struct {
		got  [][]string
		want string
	}{
		{setup, "edgecoord nats init --dir /etc/edgecoord/nats"},
		{add, "edgecoord agent enroll NAME|edgeagent enroll --coordinator URL CODE"},
		{retire, "edgecoord agent revoke NAME"},
	} {
		var lines []string
		for _, l := range c.got {
			lines = append(lines, strings.Join(l, " "))
		}
		if got := strings.Join(lines, "|"); got != c.want {
			t.Fatalf("documented commands %q, this test runs %q", got, c.want)
		}
	}
	edgeagent, edgecoord := binaries(t)

	// Once: the operator, the accounts and the server's include.
	dir := filepath.Join(t.TempDir(), "nats")
	if _, errOut, code := e2e.Run(t, e2e.Command{Path: edgecoord, Args: substitute(setup[0], map[string]string{"/etc/edgecoord/nats": dir})[1:]}); code != 0 {
		t.Fatalf("nats init: exit %d: %s", code, errOut)
	}
	ns := testenv.NATSOperator(t, filepath.Join(dir, natsauth.ServerConf))
	env := e2e.NewEnvWithNATS(t, ns)
	// The release key enrolled agents are to trust for updates.
	releasePub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	releaseKey := protocol.FormatReleaseKey(releasePub)
	c := env.StartCoordinator(e2e.CoordinatorOptions{API: true, Storage: true, Extra: "nats:\n  creds_file: " +
		filepath.Join(dir, natsauth.CoordinatorCredsFile) + "\nenrollment:\n  nats_dir: " + dir + "\n  update_public_key: " + releaseKey + "\n"})

	// Add a PC: the VPS's command prints the code, the PC's redeems it.
	enrollCode := func(name string, extra ...string) string {
		t.Helper()
		out, errOut, code := c.CLI(t, append(substitute(add[0], map[string]string{"NAME": name})[1:], extra...)...)
		if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("agent enroll %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	enrollPC := func(code string) (configPath string, stderr string, exit int) {
		t.Helper()
		configPath = filepath.Join(t.TempDir(), "edgeagent", "config.yaml")
		args := append(substitute(add[1], map[string]string{"URL": c.Base, "CODE": code})[1:], "-c", configPath)
		_, stderr, exit = e2e.Run(t, e2e.Command{Path: edgeagent, Args: args})
		return configPath, stderr, exit
	}
	codeA := enrollCode("pc-a")
	cfgA, errOut, code := enrollPC(codeA)
	if code != 0 {
		t.Fatalf("enroll pc-a: exit %d: %s", code, errOut)
	}
	cfgB, errOut, code := enrollPC(enrollCode("pc-b"))
	if code != 0 {
		t.Fatalf("enroll pc-b: exit %d: %s", code, errOut)
	}
	for _, p := range []string{cfgA, cfgB, filepath.Join(filepath.Dir(cfgA), "nats.creds"), filepath.Join(filepath.Dir(cfgB), "nats.creds")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", p, fi, err)
		}
	}
	if data, _ := os.ReadFile(cfgA); !strings.Contains(string(data), "mode: presigned") || !strings.Contains(string(data), releaseKey) || strings.Contains(string(data), "secret") {
		t.Fatalf("pc-a's config:\n%s", data)
	}

	// A reused and an expired code are refused, and nothing is written.
	for _, c := range []struct{ name, code, says string }{
		{"reused", codeA, "used already"},
		{"expired", enrollCode("pc-late", "--expires", "1ms"), "expired"},
	} {
		path, errOut, code := enrollPC(c.code)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("%s code: exit %d, stderr %q; want 2 saying %q", c.name, code, errOut, c.says)
		}
		if _, err := os.Stat(filepath.Dir(path) + "/nats.creds"); err == nil {
			t.Errorf("%s code: a creds file was written", c.name)
		}
	}

	// Each enrolled user is held to its own agent's subjects.
	credsA, credsB := filepath.Join(filepath.Dir(cfgA), "nats.creds"), filepath.Join(filepath.Dir(cfgB), "nats.creds")
	agentIdentityCases(t, ns.ClientURL(), natsAgent{"pc-a", nats.UserCredentials(credsA)}, natsAgent{"pc-b", nats.UserCredentials(credsB)})

	// Both agents run, each with a fake phone behind the real adb.
	adb := testenv.StartADB(t)
	serials := map[string]string{}
	agents := map[string]*e2e.Agent{}
	for _, id := range []string{"pc-a", "pc-b"} {
		p, err := fakeadbd.Start(fakeadbd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if o, err := adb.Run("connect", p.Addr()); err != nil {
			t.Fatalf("adb connect: %v: %s", err, o)
		}
		serials[id] = p.Serial()
		cfg := map[string]string{"pc-a": cfgA, "pc-b": cfgB}[id]
		agents[id] = env.StartAgent(e2e.AgentOptions{Enrolled: cfg, ADB: adb, Phones: []e2e.Phone{{Serial: p.Serial(), Tags: []string{"lab"}}}})
	}
	store := c.Store()
	ctx := t.Context()
	for id := range agents {
		testenv.Eventually(t, 30*time.Second, id+"'s phone ready at the coordinator", func() bool {
			a, err := store.GetAgent(ctx, id)
			if err != nil {
				return false
			}
			for _, d := range a.Devices {
				if d.Serial == serials[id] && d.Ready() {
					return true
				}
			}
			return false
		})
	}
	ran := map[string]string{}
	for id, serial := range serials {
		j, err := store.Submit(ctx, jobstore.JobSpec{Task: protocol.Task{Device: protocol.DeviceSelector{Serial: serial},
			Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "home.png"}}}})
		if err != nil {
			t.Fatal(err)
		}
		ran[id] = j.ID
	}
	for id, jobID := range ran {
		var j jobstore.Job
		testenv.Eventually(t, 60*time.Second, id+"'s job to end", func() bool {
			j, _ = store.Get(ctx, jobID)
			return jobstore.Finished(j.Status)
		})
		if j.Status != jobstore.StatusSucceeded || !strings.HasPrefix(j.CompletedBy, id+"/") {
			t.Fatalf("%s's job: %s by %s (%s)", id, j.Status, j.CompletedBy, j.FailReason)
		}
	}

	// B holds a long job: A is drained while it is granted.
	if _, errOut, code := c.CLI(t, "agent", "drain", "pc-a"); code != 0 {
		t.Fatalf("drain pc-a: %s", errOut)
	}
	long, err := store.Submit(ctx, jobstore.JobSpec{MaxAttempts: 3, Task: protocol.Task{Device: protocol.DeviceSelector{Tags: []string{"lab"}},
		Steps: []protocol.Step{{Op: protocol.OpWait, DurationMS: 600_000}}}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the long job running on pc-b", func() bool {
		j, _ := store.Get(ctx, long.ID)
		return j.Status == jobstore.StatusInProgress && strings.HasPrefix(j.WorkerID, "pc-b/")
	})
	if _, errOut, code := c.CLI(t, "agent", "resume", "pc-a"); code != 0 {
		t.Fatalf("resume pc-a: %s", errOut)
	}
	raw, err := os.ReadFile(credsB)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(raw)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	connected := func(pub string) bool {
		cz, err := ns.Connz(&server.ConnzOptions{Username: true, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ci := range cz.Conns {
			if ci.AuthorizedUser == pub {
				return true
			}
		}
		return false
	}
	if !connected(uc.Subject) {
		t.Fatal("pc-b is not connected to the NATS server before its revoke")
	}

	// Retire a PC.
	out, errOut, code := c.CLI(t, substitute(retire[0], map[string]string{"NAME": "pc-b"})[1:]...)
	if code != 0 || !strings.Contains(out, "agent pc-b revoked: 1 running jobs") {
		t.Fatalf("agent revoke pc-b: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	testenv.Eventually(t, 5*time.Second, "pc-b disconnected by the NATS server", func() bool { return !connected(uc.Subject) })
	if nc, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(credsB)); err == nil {
		nc.Close()
		t.Fatal("pc-b's user connected again after its revoke")
	}
	testenv.Eventually(t, 60*time.Second, "the long job retried on pc-a", func() bool {
		j, _ := store.Get(ctx, long.ID)
		return j.Status == jobstore.StatusInProgress && strings.HasPrefix(j.WorkerID, "pc-a/")
	})
	j, err := store.Get(ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.AttemptEnds) != 1 || j.AttemptEnds[0].Cause != jobstore.CauseAgentRevoked || j.AttemptEnds[0].Class != protocol.FailClassInfrastructure {
		t.Fatalf("the long job's attempt ends %+v, want one infrastructure end agent_revoked", j.AttemptEnds)
	}
	// A revoked name is not enrolled again.
	if _, errOut, code := c.CLI(t, "agent", "enroll", "pc-b"); code != 1 || !strings.Contains(errOut, "revoked") {
		t.Fatalf("agent enroll of the revoked pc-b: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.CLI(t, "job", "cancel", long.ID); code != 0 {
		t.Fatalf("cancel: %s", errOut)
	}
	agents["pc-a"].MustCleanShutdown(t)
	agents["pc-b"].MustCleanShutdown(t)
}
