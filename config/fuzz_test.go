package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/config"
)

// The fuzz targets feed arbitrary documents to the config parsers: they
// never panic, every failure is a list of Problems that never shows a
// secret, and what they accept is valid and prints no secret. Seeds live in
// testdata/fuzz, next to the examples and test files added here.

// fuzzSecret is what ${EDGE_FUZZ_SECRET} expands to while fuzzing.
const fuzzSecret = "fz-S3cr3t/v+lue="

// secretPaths are the field paths whose values are secrets.
var secretPaths = []string{"nats.password", "nats.token", "storage.secret_key", "store.dsn"}

func addConfigSeeds(f *testing.F, files ...string) {
	f.Helper()
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "~", "{}", "[]", "---\n---\n", "agent_id: a\n", "*x", "a: &x [*x]\n", "<<: {agent_id: a}\n",
		"nats:\n  url: nats://u:${EDGE_FUZZ_SECRET}@h:4222\n",
		"nats:\n  password: ${EDGE_FUZZ_SECRET}\n  password_file: x\n",
		"nats:\n  token: [${EDGE_FUZZ_SECRET}]\n",
		"store:\n  driver: postgres\n  dsn: \"mysql://u:${EDGE_FUZZ_SECRET}@h/db\"\n",
		"store:\n  driver: postgres\n  dsn: \"postgres://u:${EDGE_FUZZ_SECRET}@h b:%zz/db\"\n",
		"storage:\n  secret_key: ${EDGE_FUZZ_SECRET\n",
		"storage:\n  mode: presigned\n  part_size: 1.5GiB\n  bandwidth_limit: -1\n",
		"lease:\n  safety_margin: 99999999999999999999s\njobs:\n  concurrency: 99999999999999999999\n",
		"devices:\n  - &d {serial: a, tags: [x, '']}\n  - *d\n",
		"log: !!map {level: debug}\n",
		"projects:\n  a: &p {max_running: 1}\n  <<: {b: *p, c: {max_running: -1}}\n  \"\": {}\njobs:\n  default_max_running: -1\n",
		"projects:\n  ? [x]\n  : {max_running: 2}\n  y: ~\n",
		"agent_id: \"\\u00e9\\x00\"\n",
	} {
		f.Add([]byte(s))
	}
}

// checkParse checks one parse of data: err is nil or Problems, each problem
// placed inside the document and free of the secret, and an accepted
// configuration is valid and marshals with its secrets redacted.
func checkParse(t *testing.T, data []byte, cfg interface{ Validate() error }, err error) {
	t.Helper()
	if err != nil {
		var ps config.Problems
		if !errors.As(err, &ps) {
			t.Fatalf("error is not Problems: %T %v", err, err)
		}
		if len(ps) == 0 {
			t.Fatal("empty Problems returned as an error")
		}
		lines := lineCount(data)
		for _, p := range ps {
			if p.Msg == "" || strings.Contains(p.Msg, "%!") && !bytes.Contains(data, []byte("%!")) {
				t.Fatalf("malformed problem %#v", p)
			}
			if p.Line < 0 || p.Col < 0 || p.Line > lines+1 {
				t.Fatalf("problem %#v placed outside the %d-line document", p, lines)
			}
			for _, sp := range secretPaths {
				if (p.Path == sp || strings.HasPrefix(sp, p.Path+".")) && strings.Contains(p.String(), fuzzSecret) && !bytes.Contains(data, []byte(fuzzSecret)) {
					t.Fatalf("problem shows the secret: %s", p)
				}
			}
		}
		return
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("accepted configuration does not validate: %v", err)
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("marshal accepted configuration: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	for _, sp := range secretPaths {
		v := lookup(m, sp)
		if s, ok := v.(string); ok && s != "" && s != "***" {
			t.Fatalf("%s marshals as %q, not redacted", sp, s)
		}
	}
}

// lineCount counts the lines of a YAML document: a line ends with LF, CR
// LF or a lone CR.
func lineCount(data []byte) int {
	n := 1
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '\n':
			n++
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			n++
		}
	}
	return n
}

func lookup(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func FuzzParseAgent(f *testing.F) {
	addConfigSeeds(f, filepath.Join("..", "examples", "agent.yaml"), filepath.Join("testdata", "agent_invalid.yaml"))
	os.Setenv("EDGE_FUZZ_SECRET", fuzzSecret)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.ParseAgent("fuzz.yaml", data)
		if err == nil && cfg == nil {
			t.Fatal("nil configuration without an error")
		}
		var v interface{ Validate() error }
		if cfg != nil {
			v = cfg
		}
		checkParse(t, data, v, err)
	})
}

func FuzzParseCoordinator(f *testing.F) {
	addConfigSeeds(f, filepath.Join("..", "examples", "coordinator.yaml"))
	os.Setenv("EDGE_FUZZ_SECRET", fuzzSecret)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.ParseCoordinator("fuzz.yaml", data)
		if err == nil && cfg == nil {
			t.Fatal("nil configuration without an error")
		}
		var v interface{ Validate() error }
		if cfg != nil {
			v = cfg
		}
		checkParse(t, data, v, err)
	})
}
