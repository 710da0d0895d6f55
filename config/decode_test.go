package config

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// decodeAgent runs only the decoding stage on src and returns the agent and
// the rendered problems.
func decodeAgent(t *testing.T, src string, env map[string]string) (*Agent, []string) {
	t.Helper()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	d := newDecoder("f.yaml", lookup)
	a := DefaultAgent()
	d.decode([]byte(src), a)
	return a, problemStrings(t, d.problems.Err())
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown top-level key", "agent_id: a\nbogus: 1\n", []string{`f.yaml:2:1: unknown field "bogus"`}},
		{"unknown nested key with suggestion", "nats:\n  url: nats://a:4222\n  reconect_wait: 1s\n", []string{`f.yaml:3:3: nats: unknown field "reconect_wait" (did you mean "reconnect_wait"?)`}},
		{"unknown key in a list element", "devices:\n  - serial: a\n    tag: [x]\n", []string{`f.yaml:3:5: devices[0]: unknown field "tag" (did you mean "tags"?)`}},
		{"unknown key in flow mapping", "log: {level: info, colour: true}\n", []string{`f.yaml:1:20: log: unknown field "colour"`}},
		{"unknown keys all reported", "a: 1\nb: 2\nlog:\n  c: 3\n", []string{
			`f.yaml:1:1: unknown field "a"`,
			`f.yaml:2:1: unknown field "b"`,
			`f.yaml:4:3: log: unknown field "c"`,
		}},
		{"keys are case-sensitive", "Agent_ID: a\n", []string{`f.yaml:1:1: unknown field "Agent_ID" (did you mean "agent_id"?)`}},

		{"malformed duration", "lease:\n  safety_margin: 5x\n", []string{`f.yaml:2:18: lease.safety_margin: invalid duration "5x"`}},
		{"duration without unit", "jobs:\n  shutdown_timeout: 30\n", []string{`f.yaml:2:21: jobs.shutdown_timeout: invalid duration "30": missing unit (for example "30s")`}},
		{"duration given a mapping", "lease:\n  safety_margin: {s: 1}\n", []string{`f.yaml:2:18: lease.safety_margin: expected a duration such as "2s", got a mapping`}},
		{"malformed size", "storage:\n  part_size: 16XB\n", []string{`f.yaml:2:14: storage.part_size: invalid size "16XB": unknown unit "XB" (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)`}},
		{"size given a list", "storage:\n  bandwidth_limit: [1]\n", []string{`f.yaml:2:20: storage.bandwidth_limit: expected a size such as "16MiB", got a list`}},

		{"integer given a word", "jobs:\n  concurrency: many\n", []string{`f.yaml:2:16: jobs.concurrency: expected an integer, got a string "many"`}},
		{"integer given a quoted number", "jobs:\n  concurrency: \"2\"\n", []string{`f.yaml:2:16: jobs.concurrency: expected an integer, got a string "2"`}},
		{"integer given a fraction", "jobs:\n  concurrency: 1.5\n", []string{`f.yaml:2:16: jobs.concurrency: expected an integer, got a number "1.5"`}},
		{"integer out of range", "jobs:\n  concurrency: 99999999999999999999\n", []string{`f.yaml:2:16: jobs.concurrency: integer 99999999999999999999 out of range`}},
		{"boolean given yes", "storage:\n  secure: yes\n", []string{`f.yaml:2:11: storage.secure: expected true or false, got a string "yes"`}},
		{"string given a mapping", "agent_id: {a: 1}\n", []string{`f.yaml:1:11: agent_id: expected a string, got a mapping`}},
		{"string given a list", "nats:\n  url: [a, b]\n", []string{`f.yaml:2:8: nats.url: expected a string, got a list`}},
		{"section given a scalar", "nats: 5\n", []string{`f.yaml:1:7: nats: expected a mapping, got an integer`}},
		{"list given a scalar", "devices: abc\n", []string{`f.yaml:1:10: devices: expected a list, got a string`}},
		{"list element given a scalar", "devices:\n  - abc\n", []string{`f.yaml:2:5: devices[0]: expected a mapping, got a string`}},
		{"document is a list", "- a\n", []string{`f.yaml:1:1: expected a mapping, got a list`}},

		{"syntax error", "nats: [\n", []string{`f.yaml:1:7: invalid YAML: sequence end token ']' not found`}},
		{"duplicate key", "agent_id: a\nagent_id: b\n", []string{`f.yaml:2:1: invalid YAML: mapping key "agent_id" already defined at [1:1]`}},
		{"tab indentation", "log:\n\tlevel: info\n", []string{`f.yaml:2:1: invalid YAML: found character '	' that cannot start any token`}},
		{"two documents", "agent_id: a\n---\nagent_id: b\n", []string{`f.yaml:3:1: a config file holds one YAML document; found another`}},

		{"unset environment variable", "agent_id: a\nnats:\n  password: ${EDGE_TEST_UNSET}\n", []string{`f.yaml:3:13: nats.password: environment variable EDGE_TEST_UNSET is not set`}},
		{"malformed environment reference", "nats:\n  token: abc${oops\n", []string{`f.yaml:2:10: nats.token: unterminated ${ in environment variable reference (write $$ for a literal $)`}},
		{"redacted placeholder as secret", "storage:\n  secret_key: \"***\"\n", []string{`f.yaml:2:15: storage.secret_key: value is the redacted placeholder "***", not a secret`}},

		{"everything at once", "bogus: 1\nlease:\n  safety_margin: 5x\njobs:\n  concurrency: x\n", []string{
			`f.yaml:1:1: unknown field "bogus"`,
			`f.yaml:3:18: lease.safety_margin: invalid duration "5x"`,
			`f.yaml:5:16: jobs.concurrency: expected an integer, got a string "x"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := decodeAgent(t, tt.src, nil)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	env := map[string]string{"EDGE_PASS": "from-env", "EDGE_HOST": "coord.example.com"}
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, a *Agent)
	}{
		{"empty file keeps defaults", "", func(t *testing.T, a *Agent) {
			def := DefaultAgent()
			if a.Log != def.Log || a.Storage != def.Storage || a.Status != def.Status {
				t.Errorf("got %+v", a)
			}
		}},
		{"comments only", "# nothing\n", func(t *testing.T, a *Agent) {
			if a.Jobs.Concurrency != 1 {
				t.Errorf("got %+v", a.Jobs)
			}
		}},
		{"empty value keeps default", "log:\n  level:\nlease:\n", func(t *testing.T, a *Agent) {
			if a.Log.Level != "info" || a.Lease.SafetyMargin.Duration() != 2*time.Second {
				t.Errorf("got %+v %+v", a.Log, a.Lease)
			}
		}},
		{"values override defaults", "jobs:\n  concurrency: 3\n  shutdown_timeout: 1m\nstorage:\n  secure: false\n  part_size: 64MiB\n  bandwidth_limit: 1048576\n", func(t *testing.T, a *Agent) {
			if a.Jobs.Concurrency != 3 || a.Jobs.ShutdownTimeout.Duration() != time.Minute || a.Storage.Secure ||
				a.Storage.PartSize != 64*MiB || a.Storage.BandwidthLimit != MiB || a.Storage.Parallelism != 4 {
				t.Errorf("got %+v %+v", a.Jobs, a.Storage)
			}
		}},
		{"zero duration", "jobs:\n  shutdown_timeout: 0\n", func(t *testing.T, a *Agent) {
			if a.Jobs.ShutdownTimeout != 0 {
				t.Errorf("got %v", a.Jobs.ShutdownTimeout)
			}
		}},
		{"environment expansion", "nats:\n  url: nats://${EDGE_HOST}:4222\n  password: ${EDGE_PASS}\n  user: a$$b\n", func(t *testing.T, a *Agent) {
			if a.NATS.URL != "nats://coord.example.com:4222" || a.NATS.Password.Value() != "from-env" || a.NATS.User != "a$b" {
				t.Errorf("got %+v", a.NATS)
			}
		}},
		{"no expansion outside strings", "storage:\n  mode: presigned\n", func(t *testing.T, a *Agent) {
			if a.Storage.Mode != StoragePresigned {
				t.Errorf("got %q", a.Storage.Mode)
			}
		}},
		{"numeric-looking secrets keep their text", "nats:\n  password: 0123\n  token: 1.50\nstorage:\n  secret_key: !!str 0x1F\n", func(t *testing.T, a *Agent) {
			if a.NATS.Password != "0123" || a.NATS.Token != "1.50" || a.Storage.SecretKey != "0x1F" {
				t.Errorf("got %q %q %q", a.NATS.Password.Value(), a.NATS.Token.Value(), a.Storage.SecretKey.Value())
			}
		}},
		{"block scalar", "nats:\n  token: |-\n    multi\n    line\n", func(t *testing.T, a *Agent) {
			if a.NATS.Token != "multi\nline" {
				t.Errorf("got %q", a.NATS.Token.Value())
			}
		}},
		{"devices and tags", "devices:\n  - serial: a\n    tags: [x, y]\n  - {serial: b}\n", func(t *testing.T, a *Agent) {
			if len(a.Devices) != 2 || a.Devices[0].Serial != "a" || !slices.Equal(a.Devices[0].Tags, []string{"x", "y"}) || a.Devices[1].Serial != "b" {
				t.Errorf("got %+v", a.Devices)
			}
		}},
		{"anchors, aliases and merge keys", "devices:\n  - &base\n    serial: a\n    tags: [lab]\n  - <<: *base\n    serial: b\nadb:\n  path: &adb /opt/adb\nstate_dir: *adb\n", func(t *testing.T, a *Agent) {
			if len(a.Devices) != 2 || a.Devices[1].Serial != "b" || !slices.Equal(a.Devices[1].Tags, []string{"lab"}) || a.StateDir != "/opt/adb" {
				t.Errorf("got %+v %q", a.Devices, a.StateDir)
			}
		}},
		{"inline storage fields", "storage:\n  endpoint: minio:9000\n  bucket: b-1\n  access_key: AK\n", func(t *testing.T, a *Agent) {
			if a.Storage.Endpoint != "minio:9000" || a.Storage.Bucket != "b-1" || a.Storage.AccessKey != "AK" {
				t.Errorf("got %+v", a.Storage)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, problems := decodeAgent(t, tt.src, env)
			if problems != nil {
				t.Fatalf("problems: %q", problems)
			}
			tt.check(t, a)
		})
	}
}

func TestDecodeLiteralSecret(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"agent_id: a\n", false},
		{"nats:\n  password: ${P}\n", false},
		{"nats:\n  password: \"\"\n", false},
		{"nats:\n  user: literal\n", false},
		{"nats:\n  password: literal\n", true},
		{"store:\n  dsn: postgres://u:${P}@h/db\n", false},
		{"store:\n  dsn: postgres://u:pw@h/db\n", true},
	}
	for _, tt := range tests {
		d := newDecoder("f.yaml", func(string) (string, bool) { return "x", true })
		d.decode([]byte(tt.src), DefaultCoordinator())
		if d.literalSecret != tt.want {
			t.Errorf("%q: literalSecret = %v, want %v (problems %v)", tt.src, d.literalSecret, tt.want, d.problems)
		}
	}
}

// TestDecodeNeverPanics feeds malformed documents to both decoders.
func TestDecodeNeverPanics(t *testing.T) {
	inputs := []string{
		"", "~", "null", "[]", "{}", "'x'", "---\n", "---\n...\n", "*nope", "a: *nope", "nats: *nope",
		"devices: [[[]]]", "devices: [{tags: {a: 1}}]", "<<: 5", "<<: [1, 2]", "nats:\n  <<: *x\n",
		"log: !!binary aGk=", "? complex\n: key\n", "nats: {url: [}", strings.Repeat("[", 200),
		"devices:\n  - &a {serial: x}\n  - *a\n  - *a\n", "\xff\xfe", "agent_id: \"\\xZZ\"",
	}
	for _, src := range inputs {
		d := newDecoder("f.yaml", os.LookupEnv)
		d.decode([]byte(src), DefaultAgent())
		d = newDecoder("f.yaml", os.LookupEnv)
		d.decode([]byte(src), DefaultCoordinator())
	}
}
