package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/testkit/clitest"
	"github.com/rs/zerolog"
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	return clitest.WriteFile(t, "coordinator.yaml", content)
}

const validConfig = `coordinator_id: vps-1
nats:
  url: nats://127.0.0.1:4222
`

// runCLI runs the real command-line entry point and returns the exit status
// and the output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = exitCode(run(t.Context(), args, &out, &errOut))
	return code, out.String(), errOut.String()
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	path := writeConfig(t, `coordinator_id: vps-1
bogus: true
lease:
  ttl: 5x
`)
	code, stdout, stderr := runCLI(t, "config", "validate", "-c", path)
	want := path + `:2:1: unknown field "bogus"
` + path + `:4:8: lease.ttl: invalid duration "5x"
` + path + `: nats.url: required
`
	if code != 2 || stdout != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
}

func TestCommandLine(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	t.Setenv("EDGE_NATS_PASSWORD", "example")
	t.Setenv("EDGE_S3_ACCESS_KEY", "example")
	t.Setenv("EDGE_S3_SECRET_KEY", "example")
	clitest.Run(t, []cliCase{
		{"config validate", []string{"config", "validate", "-c", writeConfig(t, validConfig)}, 0, "ok\n", ""},
		{"config validate of the example", []string{"config", "validate", "-c", filepath.Join("..", "..", "examples", "coordinator.yaml")}, 0, "ok\n", ""},
		{"no arguments", nil, 2, "", "Usage: edgecoord <command>"},
		{"help", []string{"help"}, 0, "Usage: edgecoord <command>", ""},
		{"help run", []string{"help", "run"}, 0, config.DefaultCoordinatorFile, ""},
		{"help config", []string{"help", "config"}, 0, "edgecoord config <command>", ""},
		{"help lists an alias once", []string{"help"}, 0, "\n  serve, run  ", ""},
		{"help agent", []string{"help", "agent"}, 0, "  agent status  ask a connected agent for its status document", ""},
		{"help agent status", []string{"help", "agent", "status"}, 0, "Usage: edgecoord agent status [flags] ID", ""},
		{"flags after the argument", []string{"job", "show", "J", "-c", missing, "--json"}, 1, "", "edgecoord: read config: open " + missing},
		{"unknown command", []string{"bogus"}, 2, "", `edgecoord: unknown command "bogus"`},
		{"config without subcommand", []string{"config"}, 2, "", "Usage: edgecoord config <command>"},
		{"job --help", []string{"job", "--help"}, 0, "Usage: edgecoord job <command> [flags]\n\nCommands:\n  job submit", ""},
		{"job -h", []string{"job", "-h"}, 0, "  job cancel", ""},
		{"agent --help", []string{"agent", "--help"}, 0, "Usage: edgecoord agent <command>", ""},
		{"effect --help", []string{"effect", "--help"}, 0, "Usage: edgecoord effect <command>", ""},
		{"help apk", []string{"help", "apk"}, 0, "  apk add   store an APK in the coordinator's bucket for install_app steps", ""},
		{"help apk add", []string{"help", "apk", "add"}, 0, "Usage: edgecoord apk add [flags] FILE", ""},
		{"config --help", []string{"config", "--help"}, 0, "Usage: edgecoord config <command>", ""},
		{"job help", []string{"job", "help"}, 0, "Usage: edgecoord job <command>", ""},
		{"unknown flag", []string{"run", "-x"}, 2, "", "flag provided but not defined: -x"},
		{"extra argument", []string{"run", "extra"}, 2, "", `unexpected argument "extra"`},
		{"run -h", []string{"run", "-h"}, 0, "", "Usage: edgecoord run [flags]"},
		{"version", []string{"version"}, 0, "edgecoord dev (go", ""},
		{"missing config file", []string{"config", "validate", "-c", missing}, 1, "", "edgecoord: read config: open " + missing},
	}, runCLI)
}

// runWith runs the CLI with start in place of the coordinator runtime.
func runWith(t *testing.T, ctx context.Context, start func(context.Context, *config.Coordinator, zerolog.Logger) error, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := exitCode(newApp(&out, &errOut, start).Run(ctx, args))
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	path := writeConfig(t, validConfig)

	t.Run("starts the coordinator with the config and a logger", func(t *testing.T) {
		var got *config.Coordinator
		start := func(_ context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
			got = cfg
			log.Info().Msg("hello")
			return nil
		}
		code, _, stderr := runWith(t, t.Context(), start, "run", "-c", path)
		if code != 0 || got == nil || got.CoordinatorID != "vps-1" {
			t.Fatalf("exit %d, cfg %+v, stderr %q", code, got, stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil || entry["coordinator_id"] != "vps-1" {
				t.Errorf("log line %q", line)
			}
		}
	})
}

// TestOutdatedSchema checks that the management commands refuse a store
// whose schema is behind, saying to run edgecoord migrate, and that
// migrate says it migrated one.
func TestOutdatedSchema(t *testing.T) {
	db := filepath.Join(t.TempDir(), "jobs.db")
	path := writeConfig(t, validConfig+"store:\n  driver: sqlite\n  path: "+db+"\n")
	runCmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := exitCode(newAppWith(&out, &errOut, nil, &mgmt{now: time.Now}).Run(t.Context(), append(args, "-c", path)))
		return code, out.String(), errOut.String()
	}
	readOnly := [][]string{
		{"job", "list"}, {"job", "show", "j"}, {"agent", "list"}, {"agent", "show", "a"},
		{"effect", "list"}, {"effect", "show", "k"}, {"agent", "config", "a"},
	}
	// A store never migrated: refused, and left as it was.
	for _, args := range readOnly {
		code, stdout, stderr := runCmd(args...)
		want := `run "edgecoord migrate -c ` + path + `" with this binary first`
		if code != 1 || stdout != "" || !strings.Contains(stderr, "no database file") || !strings.Contains(stderr, want) {
			t.Errorf("%s on a store never migrated: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused commands created the database file (stat: %v)", err)
	}
	code, stdout, stderr := runCmd("migrate")
	if code != 0 || !strings.HasPrefix(stdout, "sqlite store at schema version ") || !strings.HasSuffix(stdout, ": migrated\n") {
		t.Fatalf("migrate of a store never migrated: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := runCmd("job", "list"); code != 0 || strings.Contains(stderr, "migrate") {
		t.Errorf("job list after migrate: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := runCmd("migrate"); code != 0 || !strings.HasSuffix(stdout, ": already up to date\n") {
		t.Errorf("migrate of a current store: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// One migration behind: the newest migration's row removed, as a store
	// migrated by the previous release would be.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if code, stdout, stderr := runCmd("job", "list"); code != 1 || stdout != "" || !strings.Contains(stderr, "this binary needs version") {
		t.Errorf("job list one migration behind: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// cliCase is a command line and what it must do, written without field
// names.
type cliCase clitest.Case
