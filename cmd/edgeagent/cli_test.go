package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/testkit/clitest"
	"github.com/rs/zerolog"
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	return clitest.WriteFile(t, "agent.yaml", content)
}

const validConfig = `agent_id: home-pc-1
nats:
  url: nats://127.0.0.1:4222
storage:
  mode: presigned
`

// directConfig is a valid config in direct storage mode, whose secret key
// the tests append.
const directConfig = `agent_id: home-pc-1
nats:
  url: nats://127.0.0.1:4222
storage:
  endpoint: minio.example.com:9000
  bucket: edge-artifacts
  access_key: edge
`

// runCLI runs the real command-line entry point and returns the exit status
// and the output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = exitCode(run(t.Context(), nil, args, &out, &errOut))
	return code, out.String(), errOut.String()
}

// TestConfigValidateReportsEveryProblem checks that one run of
// "config validate" reports an unknown key, a missing NATS URL and a
// malformed duration together, with positions or field paths, and exits 2.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	path := writeConfig(t, `agent_id: home-pc-1
bogus: true
storage:
  mode: presigned
lease:
  safety_margin: 5x
`)
	code, stdout, stderr := runCLI(t, "config", "validate", "-c", path)
	if code != 2 {
		t.Errorf("exit status = %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	want := path + `:2:1: unknown field "bogus"
` + path + `:6:18: lease.safety_margin: invalid duration "5x"
` + path + `: nats.url: required
`
	if stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

func TestConfigValidateWarns(t *testing.T) {
	if os.PathSeparator == '\\' {
		t.Skip("file modes do not govern access on Windows")
	}
	path := writeConfig(t, directConfig+"  secret_key: literal-secret\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "config", "validate", "-c", path)
	if code != 0 || stdout != "ok\n" || !strings.HasPrefix(stderr, "warning: "+path+" holds a secret") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if strings.Contains(stderr, "literal-secret") {
		t.Fatalf("warning reveals the secret: %q", stderr)
	}
}

func TestCommandLine(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	t.Setenv("EDGE_NATS_PASSWORD", "example")
	t.Setenv("EDGE_S3_ACCESS_KEY", "example")
	t.Setenv("EDGE_S3_SECRET_KEY", "example")
	clitest.Run(t, []cliCase{
		{"config validate", []string{"config", "validate", "-c", writeConfig(t, validConfig)}, 0, "ok\n", ""},
		{"config validate of the example", []string{"config", "validate", "-c", filepath.Join("..", "..", "examples", "agent.yaml")}, 0, "ok\n", ""},
		{"no arguments", nil, 2, "", "Usage: edgeagent <command>"},
		{"help", []string{"help"}, 0, "Usage: edgeagent <command>", ""},
		{"-h", []string{"-h"}, 0, "config validate", ""},
		{"--help", []string{"--help"}, 0, "Commands:", ""},
		{"help run", []string{"help", "run"}, 0, "Usage: edgeagent run [flags]", ""},
		{"help lists an alias once", []string{"help"}, 0, "\n  install, service install  ", ""},
		{"help alias", []string{"help", "service", "install"}, 0, "Usage: edgeagent service install [flags]\n\nInstall edgeagent as a service that runs at boot (systemd or Windows).\nAlso: edgeagent install.", ""},
		{"status flag after -c", []string{"status", "-c", missing, "--json"}, 1, "", "edgeagent: read config: open " + missing},
		{"help config", []string{"help", "config"}, 0, "edgeagent config <command>", ""},
		{"help config validate", []string{"help", "config", "validate"}, 0, "-c file", ""},
		{"help unknown", []string{"help", "bogus"}, 2, "", `unknown command "bogus"`},
		{"unknown command", []string{"bogus"}, 2, "", `edgeagent: unknown command "bogus"`},
		{"config without subcommand", []string{"config"}, 2, "", "Usage: edgeagent config <command>"},
		{"config --help", []string{"config", "--help"}, 0, "Usage: edgeagent config <command>", ""},
		{"service -h", []string{"service", "-h"}, 0, "Usage: edgeagent service <command>", ""},
		{"unknown config subcommand", []string{"config", "check"}, 2, "", `unknown command "config check"`},
		{"unknown flag", []string{"run", "-x"}, 2, "", "flag provided but not defined: -x"},
		{"flag without value", []string{"config", "validate", "-c"}, 2, "", "flag needs an argument: -c"},
		{"extra argument", []string{"config", "validate", "extra"}, 2, "", `unexpected argument "extra"`},
		{"run -h", []string{"run", "-h"}, 0, "", "Usage: edgeagent run [flags]"},
		{"version", []string{"version"}, 0, "edgeagent dev (go", ""},
		{"version with argument", []string{"version", "x"}, 2, "", `unexpected argument "x"`},
		{"missing config file", []string{"config", "validate", "-c", missing}, 1, "", "edgeagent: read config: open " + missing},
		{"run with missing config file", []string{"run", "-c", missing}, 1, "", "edgeagent: read config: open " + missing},
	}, runCLI)
}

func TestVersionFromLinker(t *testing.T) {
	old := version
	version = "v1.2.3"
	t.Cleanup(func() { version = old })
	if _, stdout, _ := runCLI(t, "version"); !strings.HasPrefix(stdout, "edgeagent v1.2.3 ") {
		t.Fatalf("stdout = %q", stdout)
	}
}

// runWith runs the CLI with start in place of the agent runtime.
// agentStart adapts a start function that takes the logger the agent
// logs with (the root logger with agent_id, as the agent adds it) to the
// one `edgeagent run` calls.
func agentStart(start func(context.Context, *config.Agent, zerolog.Logger) error) startFunc {
	return func(ctx context.Context, _ <-chan struct{}, cfg *config.Agent, logs logging) error {
		return start(ctx, cfg, logs.root.With().Str("agent_id", cfg.AgentID).Logger())
	}
}

func runWith(t *testing.T, ctx context.Context, start func(context.Context, *config.Agent, zerolog.Logger) error, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := exitCode(newApp(&out, &errOut, agentStart(start)).run(ctx, args))
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	path := writeConfig(t, validConfig+"log:\n  level: debug\n")

	t.Run("starts the agent with the config and a logger", func(t *testing.T) {
		var got *config.Agent
		start := func(ctx context.Context, cfg *config.Agent, log zerolog.Logger) error {
			got = cfg
			log.Debug().Str("component", "test").Msg("hello")
			return nil
		}
		code, stdout, stderr := runWith(t, t.Context(), start, "run", "-c", path)
		if code != 0 || stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if got == nil || got.AgentID != "home-pc-1" || got.Log.Level != "debug" {
			t.Fatalf("start got %+v", got)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(lines) != 3 {
			t.Fatalf("log lines:\n%s", stderr)
		}
		for _, line := range lines {
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("log line is not JSON: %q", line)
			}
			if entry["agent_id"] != "home-pc-1" || entry["time"] == nil || entry["level"] == nil {
				t.Errorf("log line lacks fields: %q", line)
			}
		}
		if !strings.Contains(lines[0], `"message":"starting edgeagent"`) || !strings.Contains(lines[1], `"message":"hello"`) {
			t.Errorf("log:\n%s", stderr)
		}
	})

	t.Run("invalid config exits 2 without starting", func(t *testing.T) {
		bad := writeConfig(t, "agent_id: a\nlease:\n  safety_margin: soon\n")
		start := func(context.Context, *config.Agent, zerolog.Logger) error {
			t.Error("agent started with an invalid config")
			return nil
		}
		code, _, stderr := runWith(t, t.Context(), start, "run", "-c", bad)
		if code != 2 || !strings.Contains(stderr, bad+`:3:18: lease.safety_margin: invalid duration "soon"`) || !strings.Contains(stderr, bad+": nats.url: required") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("console log format", func(t *testing.T) {
		console := writeConfig(t, validConfig+"log:\n  format: console\n  level: warn\n")
		start := func(_ context.Context, _ *config.Agent, log zerolog.Logger) error {
			log.Info().Msg("hidden")
			log.Warn().Msg("shown")
			return nil
		}
		code, _, stderr := runWith(t, t.Context(), start, "run", "-c", console)
		if code != 0 || strings.Contains(stderr, "hidden") || !strings.Contains(stderr, "WRN shown") || strings.Contains(stderr, "{") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("secrets stay out of the log", func(t *testing.T) {
		secretCfg := writeConfig(t, directConfig+"  secret_key: very-secret-key\n")
		start := func(_ context.Context, cfg *config.Agent, log zerolog.Logger) error {
			log.Info().Interface("config", cfg).Msg("config")
			return nil
		}
		_, _, stderr := runWith(t, t.Context(), start, "run", "-c", secretCfg)
		if strings.Contains(stderr, "very-secret-key") || !strings.Contains(stderr, `"secret_key":"***"`) {
			t.Fatalf("stderr %q", stderr)
		}
	})
}

// cliCase is a command line and what it must do, written without field
// names.
type cliCase clitest.Case
