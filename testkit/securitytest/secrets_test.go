package securitytest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// withPassword returns dsn with password set on its user.
func withPassword(t *testing.T, dsn, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

func httpGet(t *testing.T, o *output, rawURL string) {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	o.addText("GET "+rawURL, resp.Status+"\n"+string(body))
}

// TestSecretsNeverInLogs runs the edgecoord and edgeagent binaries the way
// an operator does, with distinctive secrets in their configurations (the
// NATS passwords of both, the PostgreSQL password inside the DSN, the S3
// secret key of both; written literally, through ${ENV} and through a
// *_file), at log level trace: a job runs end to end, every management and
// diagnostic command is run, the HTTP endpoints are read, and then the same
// again with wrong secrets and broken configurations, so that every error
// path that might quote a credential is taken. Everything printed (zerolog
// output, stdout and stderr of every command, HTTP bodies) is scanned for
// every secret in raw, URL-escaped, JSON-escaped, hex and base64 form.
func TestSecretsNeverInLogs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the binaries with Unix signals and file modes")
	}
	edgeagent, edgecoord := binaries(t)
	mio := testenv.MinIO(t)
	baseDSN := testenv.Postgres(t)
	tag := randHex(6)
	secrets := map[string]string{
		"coordinator NATS password": "cn-" + tag + "/Zx+Q=k",
		"agent NATS password":       "an-" + tag + "/Qp+W=j",
		"PostgreSQL password":       "pg-" + tag + "@/:+x",
		"S3 secret key":             mio.SecretKey,
		"wrong NATS password":       "wn-" + tag + "/Lm+R=z",
		"wrong S3 secret key":       "ws-" + tag + "/Kd+T=y",
		"unreachable DSN password":  "ud-" + tag + "%?#&x",
	}
	if len(mio.SecretKey) < 12 || strings.Contains(mio.AccessKey, mio.SecretKey) {
		t.Fatalf("the MinIO secret key is too plain to be searched for in logs")
	}
	dsn := withPassword(t, baseDSN, secrets["PostgreSQL password"])
	secrets["DSN"] = dsn
	badDSN := withPassword(t, "postgres://edge@"+testenv.FreeAddr(t)+"/edge?sslmode=disable&connect_timeout=2", secrets["unreachable DSN password"])
	secrets["unreachable DSN"] = badDSN
	typed := "typed-" + tag // text typed on the phone: a payload, never logged

	ns := natsFromExample(t, secrets["coordinator NATS password"], secrets["agent NATS password"], "garage-"+tag)
	natsURL := ns.ClientURL()
	dir := t.TempDir()
	o := &output{}
	// Secrets reach the processes through the environment as an operator's
	// unit file would pass them.
	env := []string{
		"EDGE_SEC_COORD_NATS=" + secrets["coordinator NATS password"],
		"EDGE_SEC_DSN=" + dsn,
		"EDGE_SEC_S3_SECRET=" + mio.SecretKey,
	}

	metricsAddr := testenv.FreeAddr(t)
	coordYAML := func(dsnRef string) string {
		return fmt.Sprintf(`coordinator_id: sec-coord
log:
  level: trace
nats:
  url: %s
  user: edgecoord
  password: ${EDGE_SEC_COORD_NATS}
  request_timeout: 2s
store:
  driver: postgres
  dsn: %s
lease:
  ttl: 5s
  reap_interval: 200ms
scheduler:
  interval: 50ms
agents:
  heartbeat: 200ms
  offline_after: 3s
storage:
  endpoint: %s
  secure: false
  region: us-east-1
  bucket: %s
  access_key: %s
  secret_key: %s
metrics:
  listen: %s
`, natsURL, dsnRef, mio.Endpoint, mio.Bucket, mio.AccessKey, mio.SecretKey, metricsAddr)
	}
	coordCfg := writeFile(t, dir, "coordinator.yaml", coordYAML("${EDGE_SEC_DSN}"), 0o600)

	passwordFile := writeFile(t, dir, "nats-password", secrets["agent NATS password"]+"\n", 0o600)
	statusAddr := testenv.FreeAddr(t)
	agentYAML := func(natsAuth, s3Secret string) string {
		return fmt.Sprintf(`agent_id: pc-kitchen
state_dir: %s
log:
  level: trace
nats:
  url: %s
  user: pc-kitchen
  %s
  reconnect_wait: 100ms
  request_timeout: 2s
lease:
  safety_margin: 500ms
jobs:
  shutdown_timeout: 5s
storage:
  endpoint: %s
  secure: false
  region: us-east-1
  bucket: %s
  access_key: %s
  secret_key: %s
  part_size: 5MiB
status:
  listen: %s
devices:
  - serial: sim-1
    simulated: true
`, filepath.Join(dir, "state"), natsURL, natsAuth, mio.Endpoint, mio.Bucket, mio.AccessKey, s3Secret, statusAddr)
	}
	agentCfg := writeFile(t, dir, "agent.yaml", agentYAML("password_file: "+passwordFile, "${EDGE_SEC_S3_SECRET}"), 0o600)

	// ── A job end to end ────────────────────────────────────────────────
	if _, stderr, code := o.run(t, env, edgecoord, "migrate", "-c", coordCfg); code != 0 {
		t.Fatalf("edgecoord migrate: exit %d: %s", code, stderr)
	}
	coord := o.start(t, env, edgecoord, "serve", "-c", coordCfg)
	agent := o.start(t, env, edgeagent, "run", "-c", agentCfg)
	store, err := pgstore.Open(context.Background(), baseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "the agent to say hello", func() bool {
		a, err := store.GetAgent(ctx, "pc-kitchen")
		return err == nil && a.BootID != "" && len(a.Devices) == 1
	})
	jobFile := writeFile(t, dir, "job.json", fmt.Sprintf(`{"id": "sec-job", "steps": [
		{"op": "launch", "package": "com.example.app"},
		{"op": "text", "text": %q},
		{"op": "screenshot", "name": "shot"},
		{"op": "ui_dump", "name": "home"}]}`, typed), 0o600)
	if out, stderr, code := o.run(t, env, edgecoord, "job", "submit", "-c", coordCfg, "-f", jobFile); code != 0 {
		t.Fatalf("job submit: exit %d: %s%s", code, out, stderr)
	}
	var job jobstore.Job
	testenv.Eventually(t, 60*time.Second, "the job to finish", func() bool {
		job, err = store.Get(ctx, "sec-job")
		return err == nil && (job.Status == jobstore.StatusSucceeded || job.Status == jobstore.StatusFailed)
	})
	if job.Status != jobstore.StatusSucceeded {
		t.Fatalf("job %s: %s", job.Status, job.FailReason)
	}
	for _, args := range [][]string{
		{"job", "show", "-c", coordCfg, "sec-job"},
		{"job", "list", "-c", coordCfg},
		{"agent", "list", "-c", coordCfg},
		{"agent", "show", "-c", coordCfg, "pc-kitchen"},
		{"config", "validate", "-c", coordCfg},
	} {
		if out, stderr, code := o.run(t, env, edgecoord, args...); code != 0 {
			t.Fatalf("edgecoord %s: exit %d: %s%s", strings.Join(args, " "), code, out, stderr)
		}
	}
	for _, args := range [][]string{
		{"status", "-c", agentCfg},
		{"status", "-c", agentCfg, "-json"},
		{"doctor", "-c", agentCfg},
		{"config", "validate", "-c", agentCfg},
	} {
		// doctor may find things to complain about on a test machine (no
		// adb); what it prints is what matters here.
		o.run(t, env, edgeagent, args...)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		httpGet(t, o, "http://"+metricsAddr+path)
	}
	for _, path := range []string{"/status", "/metrics", "/healthz", "/readyz"} {
		httpGet(t, o, "http://"+statusAddr+path)
	}
	if code := agent.Stop(t); code != 0 {
		t.Errorf("edgeagent run exited %d", code)
	}

	// ── Wrong secrets, while the coordinator still runs ─────────────────
	wrongNATS := writeFile(t, dir, "agent-wrong-nats.yaml", agentYAML("password: "+secrets["wrong NATS password"], "${EDGE_SEC_S3_SECRET}"), 0o600)
	p := o.start(t, env, edgeagent, "run", "-c", wrongNATS)
	time.Sleep(2 * time.Second) // a few refused connection attempts
	p.Stop(t)
	o.run(t, env, edgeagent, "doctor", "-c", wrongNATS)

	wrongS3 := writeFile(t, dir, "agent-wrong-s3.yaml", agentYAML("password_file: "+passwordFile, secrets["wrong S3 secret key"]), 0o600)
	o.run(t, env, edgeagent, "doctor", "-c", wrongS3)
	p = o.start(t, env, edgeagent, "run", "-c", wrongS3)
	jobFile2 := writeFile(t, dir, "job2.json", `{"id": "sec-job-2", "steps": [{"op": "screenshot", "name": "shot"}]}`, 0o600)
	o.run(t, env, edgecoord, "job", "submit", "-c", coordCfg, "-f", jobFile2)
	// The upload is refused by the storage; whatever the agent makes of
	// that within a few seconds is logged.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(p.Log(), "SignatureDoesNotMatch") || strings.Contains(p.Log(), "signature") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Stop(t)
	if code := coord.Stop(t); code != 0 {
		t.Errorf("edgecoord serve exited %d", code)
	}

	// ── A store that cannot be reached ──────────────────────────────────
	badCoordCfg := writeFile(t, dir, "coordinator-bad-dsn.yaml", coordYAML(`"`+badDSN+`"`), 0o600)
	if _, _, code := o.run(t, env, edgecoord, "serve", "-c", badCoordCfg); code == 0 {
		t.Error("edgecoord serve with an unreachable store exited 0")
	}
	o.run(t, env, edgecoord, "job", "list", "-c", badCoordCfg)

	// ── Configurations that do not load ─────────────────────────────────
	for name, src := range map[string]string{
		"url-with-credentials.yaml": fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: nats://pc-kitchen:%s@127.0.0.1:4222\nstorage:\n  mode: presigned\n", url.PathEscape(secrets["agent NATS password"])),
		"broken-url.yaml":           fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: \"nats://pc-kitchen:%s@h b:%%zz\"\nstorage:\n  mode: presigned\n", secrets["agent NATS password"]),
		"secret-as-mapping.yaml":    fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: nats://h:4222\n  token: {%q: 1}\nstorage:\n  mode: presigned\n", secrets["agent NATS password"]),
		"secret-and-file.yaml":      fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: nats://h:4222\n  user: u\n  password: %q\n  password_file: /nonexistent\nstorage:\n  secret_key: %q\n", secrets["agent NATS password"], mio.SecretKey),
		"presigned-with-keys.yaml":  fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n  access_key: %s\n  secret_key: %q\n", mio.AccessKey, mio.SecretKey),
		"yaml-syntax.yaml":          fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  password: %q\n  url: [\n", secrets["agent NATS password"]),
	} {
		cfg := writeFile(t, dir, name, src, 0o600)
		if _, _, code := o.run(t, env, edgeagent, "config", "validate", "-c", cfg); code != 2 {
			t.Errorf("edgeagent config validate %s: exit %d, want 2", name, code)
		}
		o.run(t, env, edgeagent, "run", "-c", cfg)
	}
	for name, src := range map[string]string{
		"dsn-bad-port.yaml":     fmt.Sprintf("nats:\n  url: nats://h:4222\nstore:\n  driver: postgres\n  dsn: \"postgres://edge:%s@db:port/x\"\n", secrets["PostgreSQL password"]),
		"dsn-wrong-scheme.yaml": fmt.Sprintf("nats:\n  url: nats://h:4222\nstore:\n  driver: postgres\n  dsn: \"mysql://edge:%s@db/x\"\n", url.PathEscape(secrets["PostgreSQL password"])),
		"dsn-with-sqlite.yaml":  "nats:\n  url: nats://h:4222\nstore:\n  driver: sqlite\n  dsn: ${EDGE_SEC_DSN}\n",
	} {
		cfg := writeFile(t, dir, name, src, 0o600)
		if _, _, code := o.run(t, env, edgecoord, "config", "validate", "-c", cfg); code != 2 {
			t.Errorf("edgecoord config validate %s: exit %d, want 2", name, code)
		}
	}

	// ── The scan ────────────────────────────────────────────────────────
	n := 0
	for _, f := range o.findSecrets(secrets, &n) {
		t.Error(f)
	}
	// Typed text is a payload: the agent's log never shows it (the job's
	// own task, shown to the operator by edgecoord job show, does).
	agentOnly := &output{all: []capture{{agent.Name(), agent.Log}}}
	for _, f := range agentOnly.findSecrets(map[string]string{"typed text": typed}, new(int)) {
		t.Error(f)
	}
	// The scan read what it had to: the run logged at trace level and the
	// failures were reported.
	for what, re := range map[string]*regexp.Regexp{
		"the agent's trace log":         regexp.MustCompile(`"level":"(trace|debug)"`),
		"the refused NATS login":        regexp.MustCompile(`(?i)authori[sz]ation violation`),
		"the unreachable store":         regexp.MustCompile(`(?i)(connect|refused|dial)`),
		"the config problem with a URL": regexp.MustCompile(`nats\.url: .*must not contain credentials`),
	} {
		if !o.matches(re) {
			t.Errorf("no output shows %s (%v): the scan did not cover it", what, re)
		}
	}
	t.Logf("scanned %d bytes of output from %d captures for %d secrets", n, len(o.all), len(secrets))
	if t.Failed() {
		for _, c := range o.all {
			if s := c.text(); s != "" {
				t.Logf("── %s\n%s", c.what, s)
			}
		}
	}
}

// TestConfigWarnings: a config file that holds a secret and that other
// users can read makes both binaries warn (config validate on stderr, run in
// its log), and so does a secret file others can read; a private file, or a
// shared one whose secrets come from the environment, does not.
func TestConfigWarnings(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file modes")
	}
	edgeagent, edgecoord := binaries(t)
	dir := t.TempDir()
	o := &output{}
	env := []string{"EDGE_SEC_PW=from-env"}
	secretFile := writeFile(t, dir, "pw", "from-file\n", 0o644)
	agentSrc := func(auth string) string {
		return "agent_id: pc-kitchen\nnats:\n  url: nats://127.0.0.1:1\n  user: pc-kitchen\n  " + auth + "\nstorage:\n  mode: presigned\n"
	}
	coordSrc := func(auth string) string {
		return "nats:\n  url: nats://127.0.0.1:1\n  user: edgecoord\n  " + auth + "\nstore:\n  path: " + filepath.Join(dir, "db") + "\n"
	}
	const readable = "readable by group or others"
	for _, tc := range []struct {
		name, auth string
		mode       os.FileMode
		warn       bool
	}{
		{"literal secret, mode 0644", "password: literal-pw", 0o644, true},
		{"literal secret, mode 0640", "password: literal-pw", 0o640, true},
		{"literal secret, mode 0600", "password: literal-pw", 0o600, false},
		{"secret from the environment, mode 0644", "password: ${EDGE_SEC_PW}", 0o644, false},
		{"secret file readable by others", "password_file: " + secretFile, 0o600, true},
	} {
		for _, bin := range []struct {
			path, src string
		}{{edgeagent, agentSrc(tc.auth)}, {edgecoord, coordSrc(tc.auth)}} {
			cfg := writeFile(t, t.TempDir(), "config.yaml", bin.src, tc.mode)
			stdout, stderr, code := o.run(t, env, bin.path, "config", "validate", "-c", cfg)
			if code != 0 || strings.TrimSpace(stdout) != "ok" {
				t.Fatalf("%s, %s config validate: exit %d\n%s%s", tc.name, filepath.Base(bin.path), code, stdout, stderr)
			}
			if got := strings.Contains(stderr, "warning: ") && strings.Contains(stderr, readable); got != tc.warn {
				t.Errorf("%s, %s config validate: warned %v, want %v:\n%s", tc.name, filepath.Base(bin.path), got, tc.warn, stderr)
			}
			if strings.Contains(stderr, "literal-pw") || strings.Contains(stderr, "from-file") || strings.Contains(stderr, "from-env") {
				t.Errorf("the warning shows the secret: %s", stderr)
			}
		}
	}
	// edgeagent run logs the warning at level warn before it starts.
	cfg := writeFile(t, dir, "agent.yaml", agentSrc("password: literal-pw")+"state_dir: "+filepath.Join(dir, "state")+"\nstatus:\n  listen: "+testenv.FreeAddr(t)+"\n", 0o644)
	p := o.start(t, env, edgeagent, "run", "-c", cfg)
	testenv.Eventually(t, 20*time.Second, "the warning in the log", func() bool {
		return regexp.MustCompile(`"level":"warn".*` + readable).MatchString(p.Log())
	})
	p.Stop(t)
}
