package config

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// writeConfig writes a config file with mode 0600 and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	return tempFile(t, "config.yaml", content)
}

// TestLoadAgentReportsEveryProblem is the contract of the pipeline: an
// unknown key, a missing NATS URL and a malformed duration in one file are
// all reported, each with its position or field path.
func TestLoadAgentReportsEveryProblem(t *testing.T) {
	path := writeConfig(t, `agent_id: home-pc-1
storage:
  mode: presigned
bogus: 1
lease:
  safety_margin: 5x
`)
	_, err := LoadAgent(path)
	checkProblems(t, err, []string{
		path + `:4:1: unknown field "bogus"`,
		path + `:6:18: lease.safety_margin: invalid duration "5x"`,
		path + `: nats.url: required`,
	})
}

func TestLoadAgentGolden(t *testing.T) {
	const name = "testdata/agent_invalid.yaml"
	_, err := LoadAgent(name)
	if err == nil {
		t.Fatal("no problems")
	}
	got := problemStrings(t, err)
	golden := filepath.Join("testdata", "agent_invalid.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if g := strings.Join(got, "\n") + "\n"; g != string(want) {
		t.Fatalf("problems differ from %s (run with -update to accept):\ngot:\n%s\nwant:\n%s", golden, g, want)
	}
}

func TestLoadAgentValid(t *testing.T) {
	t.Setenv("EDGE_TEST_S3_SECRET", "s3-secret-value")
	path := writeConfig(t, `agent_id: home-pc-1
nats:
  url: nats://127.0.0.1:4222
storage:
  endpoint: 127.0.0.1:9000
  secure: false
  bucket: edge-artifacts
  access_key: minio
  secret_key: ${EDGE_TEST_S3_SECRET}
devices:
  - serial: emulator-5554
`)
	a, err := LoadAgent(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.AgentID != "home-pc-1" || a.Storage.SecretKey.Value() != "s3-secret-value" || a.Storage.Secure || len(a.Devices) != 1 {
		t.Fatalf("got %+v", a)
	}
	if w := a.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
	if err := a.Validate(); err != nil {
		t.Errorf("loaded config fails Validate: %v", err)
	}
}

func TestLoadPlacesValidationProblems(t *testing.T) {
	path := writeConfig(t, `agent_id: "home pc"
nats:
  url: nats://127.0.0.1:4222
storage:
  mode: presigned
status:
  listen: 0.0.0.0:7070
devices:
  - serial: a
  - serial: a
`)
	_, err := LoadAgent(path)
	checkProblems(t, err, []string{
		path + `:1:11: agent_id: "home pc": want 1-64 characters from A-Z, a-z, 0-9, _ and -`,
		path + `:7:11: status.listen: "0.0.0.0:7070": must be a loopback address such as 127.0.0.1:7070 or [::1]:7070`,
		path + `:10:13: devices[1].serial: "a" is already listed as devices[0]`,
	})
}

func TestLoadDoesNotRepeatDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"section of the wrong kind", "agent_id: a\nstorage: {mode: presigned}\nnats: 5\n", []string{
			`:3:7: nats: expected a mapping, got an integer`,
		}},
		{"unset variable", "agent_id: a\nstorage: {mode: presigned}\nnats:\n  url: ${EDGE_TEST_UNSET_URL}\n", []string{
			`:4:8: nats.url: environment variable EDGE_TEST_UNSET_URL is not set`,
		}},
		{"syntax error only", "agent_id: [\n", []string{
			`:1:11: invalid YAML: sequence end token ']' not found`,
		}},
		{"document of the wrong kind", "just a string\n", []string{
			`:1:1: expected a mapping, got a string`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.src)
			_, err := LoadAgent(path)
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = path + w
			}
			checkProblems(t, err, want)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := LoadAgent(filepath.Join(t.TempDir(), "nope.yaml"))
	var ps Problems
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &ps) || !strings.HasPrefix(err.Error(), "read config: ") {
		t.Fatalf("err = %v", err)
	}
	_, err = LoadCoordinator(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadSecretFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"nats-password": "nats-pw\n",
		"s3-secret":     "s3-sk\r\n",
		"empty":         "",
		"agent.creds":   "creds",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "config.yaml")
	write := func(src string) {
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Relative file names are relative to the config file's directory.
	write(`agent_id: a
nats:
  url: nats://127.0.0.1:4222
  user: edge
  password_file: nats-password
storage:
  endpoint: minio:9000
  bucket: edge-artifacts
  access_key: AK
  secret_key_file: s3-secret
`)
	a, err := LoadAgent(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.NATS.Password.Value() != "nats-pw" || a.NATS.PasswordFile != "" ||
		a.Storage.SecretKey.Value() != "s3-sk" || a.Storage.SecretKeyFile != "" {
		t.Fatalf("got %+v %+v", a.NATS, a.Storage)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("Validate after load: %v", err)
	}

	write(`agent_id: a
nats:
  url: nats://127.0.0.1:4222
  creds_file: agent.creds
storage:
  mode: presigned
`)
	a, err = LoadAgent(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.NATS.CredsFile != filepath.Join(dir, "agent.creds") {
		t.Fatalf("creds_file = %q", a.NATS.CredsFile)
	}

	write(`agent_id: a
nats:
  url: nats://127.0.0.1:4222
  token_file: empty
storage:
  mode: presigned
`)
	_, err = LoadAgent(path)
	checkProblems(t, err, []string{path + ":4:15: nats.token_file: " + filepath.Join(dir, "empty") + " is empty"})

	write(`agent_id: a
nats:
  url: nats://127.0.0.1:4222
  token_file: missing
storage:
  mode: presigned
`)
	_, err = LoadAgent(path)
	checkProblems(t, err, []string{path + ":4:15: nats.token_file: file " + filepath.Join(dir, "missing") + " does not exist"})
}

func TestLoadWarnings(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not govern access on Windows")
	}
	t.Setenv("EDGE_TEST_PW", "pw")
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(secretFile, []byte("pw"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		mode     os.FileMode
		password string
		want     []string
	}{
		{"private file with secret", 0o600, "password: literal", nil},
		{"shared file without secret", 0o644, "password: ${EDGE_TEST_PW}", nil},
		{"group-readable file with secret", 0o640, "password: literal", []string{"holds a secret and is readable by group or others (mode 0640)"}},
		{"world-readable file with secret", 0o604, "password: literal", []string{"holds a secret and is readable by group or others (mode 0604)"}},
		{"world-readable secret file", 0o600, "password_file: " + secretFile, []string{"nats.password_file: " + secretFile + " is readable by group or others (mode 0644)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			src := "agent_id: a\nnats:\n  url: nats://h:4222\n  user: u\n  " + tt.password + "\nstorage:\n  mode: presigned\n"
			if err := os.WriteFile(path, []byte(src), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			a, err := LoadAgent(path)
			if err != nil {
				t.Fatal(err)
			}
			got := a.Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("warnings = %q, want %d", got, len(tt.want))
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("warning %q lacks %q", got[i], tt.want[i])
				}
			}
		})
	}
}

// TestProblemsNeverShowSecrets puts secrets where problems are reported and
// checks the messages do not contain them.
func TestProblemsNeverShowSecrets(t *testing.T) {
	const secret = "Sup3rS3cret"
	t.Setenv("EDGE_TEST_SECRET", secret)
	agent := `agent_id: a
nats:
  url: nats://edge:` + secret + `@h:4222
  password: ` + secret + `
  token: [` + secret + `]
  token_file: x${` + secret + `-x}
storage:
  secret_key: {` + secret + `: 1}
  secret_key_file: /nonexistent/file
`
	coordinator := `nats:
  url: nats://h:4222
  password: ` + secret + `
store:
  driver: postgres
  dsn: "mysql://u:` + secret + `@h/db"
storage:
  secret_key: ${EDGE_TEST_SECRET}
`
	brokenURL := "agent_id: a\nnats:\n  url: \"nats://u:" + secret + "@h b:%zz\"\n"
	for _, src := range []string{agent, coordinator, brokenURL} {
		path := writeConfig(t, src)
		_, errA := LoadAgent(path)
		_, errC := LoadCoordinator(path)
		for _, err := range []error{errA, errC} {
			if err == nil {
				t.Fatalf("no problems for:\n%s", src)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("problems reveal the secret:\n%v", err)
			}
		}
	}
}

func TestLoadCoordinator(t *testing.T) {
	t.Setenv("EDGE_TEST_PG_PASSWORD", "pg-pw")
	path := writeConfig(t, `coordinator_id: vps-1
nats:
  url: nats://127.0.0.1:4222,nats://127.0.0.1:4223
store:
  driver: postgres
  dsn: postgres://edgecoord:${EDGE_TEST_PG_PASSWORD}@127.0.0.1:5432/edgecoord?sslmode=disable
lease:
  ttl: 10s
  reap_interval: 250ms
metrics:
  listen: ""
`)
	c, err := LoadCoordinator(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.CoordinatorID != "vps-1" || len(c.NATS.Servers()) != 2 ||
		c.Store.DSN.Value() != "postgres://edgecoord:pg-pw@127.0.0.1:5432/edgecoord?sslmode=disable" ||
		c.Lease.TTL.String() != "10s" || c.Lease.ReapInterval.String() != "250ms" || c.Metrics.Listen != "" || c.Storage.Enabled() {
		t.Fatalf("got %+v", c)
	}

	path = writeConfig(t, `nats:
  url: nats://127.0.0.1:4222
lease:
  ttl: 1s
  reap_interval: 2s
scheduler:
  intervall: 1s
jobs:
  max_attempts: 0
  retry_backoff: soon
`)
	_, err = LoadCoordinator(path)
	checkProblems(t, err, []string{
		path + `:5:18: lease.reap_interval: must be shorter than lease.ttl (1s), got 2s`,
		path + `:7:3: scheduler: unknown field "intervall" (did you mean "interval"?)`,
		path + `:9:17: jobs.max_attempts: must be at least 1, got 0`,
		path + `:10:18: jobs.retry_backoff: invalid duration "soon"`,
	})

	path = writeConfig(t, `nats:
  url: nats://127.0.0.1:4222
jobs:
  default_timeout: 90s
  max_attempts: 5
  retry_backoff: 500ms
  retry_backoff_max: 30s
`)
	c, err = LoadCoordinator(path)
	if err != nil || c.Jobs != (CoordinatorJobs{DefaultTimeout: Duration(90 * time.Second), MaxAttempts: 5,
		RetryBackoff: Duration(500 * time.Millisecond), RetryBackoffMax: Duration(30 * time.Second)}) {
		t.Fatalf("jobs section: %+v, %v", c.Jobs, err)
	}
}

func TestParseAgent(t *testing.T) {
	a, err := ParseAgent("inline.yaml", []byte("agent_id: a\nnats: {url: \"nats://h:4222\"}\nstorage: {mode: presigned}\n"))
	if err != nil || a.AgentID != "a" {
		t.Fatalf("ParseAgent = %+v, %v", a, err)
	}
	_, err = ParseAgent("inline.yaml", []byte("agent_id: a\n"))
	checkProblems(t, err, []string{
		"inline.yaml: nats.url: required",
		"inline.yaml: storage.endpoint: required",
		"inline.yaml: storage.bucket: required",
		"inline.yaml: storage.access_key: required",
		"inline.yaml: storage.secret_key: required (or set storage.secret_key_file)",
	})
	c, err := ParseCoordinator("inline.yaml", []byte("nats: {url: \"nats://h:4222\"}\n"))
	if err != nil || c.Store.Driver != StoreSQLite {
		t.Fatalf("ParseCoordinator = %+v, %v", c, err)
	}
}

// TestExamples loads the example files, which must be valid and list
// every option.
func TestExamples(t *testing.T) {
	t.Setenv("EDGE_NATS_PASSWORD", "example-nats-password")
	t.Setenv("EDGE_S3_ACCESS_KEY", "example-access-key")
	t.Setenv("EDGE_S3_SECRET_KEY", "example-secret-key")

	a, err := LoadAgent(filepath.Join("..", "examples", "agent.yaml"))
	if err != nil {
		t.Fatalf("examples/agent.yaml: %v", err)
	}
	if a.NATS.Password.Value() != "example-nats-password" || a.Storage.SecretKey.Value() != "example-secret-key" || len(a.Warnings()) != 0 {
		t.Errorf("examples/agent.yaml: %+v, warnings %q", a, a.Warnings())
	}
	c, err := LoadCoordinator(filepath.Join("..", "examples", "coordinator.yaml"))
	if err != nil {
		t.Fatalf("examples/coordinator.yaml: %v", err)
	}
	if !c.Storage.Enabled() || len(c.Warnings()) != 0 {
		t.Errorf("examples/coordinator.yaml: %+v, warnings %q", c, c.Warnings())
	}

	for file, typ := range map[string]reflect.Type{
		"agent.yaml":       reflect.TypeFor[Agent](),
		"coordinator.yaml": reflect.TypeFor[Coordinator](),
	} {
		text, err := os.ReadFile(filepath.Join("..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range yamlKeys(typ) {
			if !strings.Contains(string(text), key+":") {
				t.Errorf("examples/%s does not show option %q", file, key)
			}
		}
	}
}

// yamlKeys lists every key a config type accepts.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for name, index := range structFields(t) {
		keys = append(keys, name)
		ft := t.FieldByIndex(index).Type
		if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textUnmarshalerType) {
			keys = append(keys, yamlKeys(ft)...)
		}
	}
	return keys
}

// TestPresignedUnusedSettingsWarn: bucket settings and multipart tuning are
// valid in presigned mode but do nothing there; each one set is named.
func TestPresignedUnusedSettingsWarn(t *testing.T) {
	base := "agent_id: a\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n"
	a, err := ParseAgent("agent.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Warnings(); len(w) != 0 {
		t.Fatalf("presigned defaults: warnings %q", w)
	}
	a, err = ParseAgent("agent.yaml", []byte(base+"  endpoint: s3.example.com\n  bucket: edge-art\n  part_size: 32MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := a.Warnings()
	want := []string{"storage.endpoint: has no effect in presigned mode", "storage.bucket: has no effect", "storage.part_size: has no effect"}
	if len(w) != len(want) {
		t.Fatalf("warnings %q, want %d", w, len(want))
	}
	for i := range want {
		if !strings.Contains(w[i], want[i]) {
			t.Errorf("warning %q lacks %q", w[i], want[i])
		}
	}
	a, err = ParseAgent("agent.yaml", []byte(strings.Replace(base, "presigned", "direct", 1)+"  endpoint: s3.example.com\n  bucket: edge-art\n  access_key: k\n  secret_key: s\n  part_size: 32MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Warnings(); len(w) != 0 {
		t.Errorf("direct mode: warnings %q", w)
	}
}
