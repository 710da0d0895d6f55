package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
)

// daemonConfig is a loaded config of the test daemon.
type daemonConfig struct{ warnings []string }

func (c daemonConfig) Warnings() []string { return c.warnings }

// runDaemon runs "prog run -c path" of a daemon whose start function is
// start; the config at path "bad.yaml" is invalid. It returns the exit
// status and stderr, where the daemon logs.
func runDaemon(t *testing.T, ctx context.Context, path string, start func(context.Context) error) (int, string) {
	t.Helper()
	load := func(path string) (daemonConfig, error) {
		if path == "bad.yaml" {
			return daemonConfig{}, config.Problems{{File: path, Line: 2, Col: 11, Path: "store.driver", Msg: `must be sqlite or postgres, got "mysql"`}}
		}
		return daemonConfig{warnings: []string{"storage.part_size has no effect in presigned mode"}}, nil
	}
	var out, errOut bytes.Buffer
	cmd := DaemonCommand(&Command{Name: "run", Summary: "run"}, "v1.2.3", "default.yaml", load,
		func(ctx context.Context, c *Call, _ daemonConfig, d Daemon) error {
			d.Log = zerolog.New(c.Stderr)
			return d.Run(ctx, c, start)
		})
	app := &App{Name: "prog", Description: "prog runs.", Stdout: &out, Stderr: &errOut, Commands: []*Command{cmd}}
	return ExitCode(app.Run(ctx, []string{"run", "-c", path})), errOut.String()
}

// TestDaemonCommand is the run command every daemon shares: how a start
// that fails, a cancellation and an invalid config end.
func TestDaemonCommand(t *testing.T) {
	t.Run("runtime failure exits 1 and is logged", func(t *testing.T) {
		code, stderr := runDaemon(t, t.Context(), "ok.yaml", func(context.Context) error { return errors.New("open store: locked") })
		if code != 1 || !strings.Contains(stderr, `"error":"open store: locked"`) || !strings.Contains(stderr, "prog stopped with an error") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("cancellation is a clean stop", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		code, stderr := runDaemon(t, ctx, "ok.yaml", func(ctx context.Context) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		if code != 0 || !strings.Contains(stderr, `"message":"prog stopped"`) {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("warnings and the start are logged", func(t *testing.T) {
		code, stderr := runDaemon(t, t.Context(), "ok.yaml", func(context.Context) error { return nil })
		for _, want := range []string{"storage.part_size has no effect in presigned mode", `"version":"v1.2.3"`, `"config":"ok.yaml"`, "starting prog"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("log lacks %q: %q", want, stderr)
			}
		}
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("invalid config exits 2 without starting", func(t *testing.T) {
		code, stderr := runDaemon(t, t.Context(), "bad.yaml", func(context.Context) error {
			t.Error("started with an invalid config")
			return nil
		})
		if code != 2 || !strings.Contains(stderr, `bad.yaml:2:11: store.driver: must be sqlite or postgres, got "mysql"`) {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}
