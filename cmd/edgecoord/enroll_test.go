package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/clitest"
)

// TestEnrollCommandLine: the enrollment commands refuse bad input with
// exit 2 naming what is wrong before touching anything: a bad agent name,
// an expiry out of range, a coordinator without enrollment, nats init
// without --dir or over a directory that holds keys.
func TestEnrollCommandLine(t *testing.T) {
	cfg := writeConfig(t, validConfig+"store:\n  path: "+filepath.Join(t.TempDir(), "c.db")+"\n")
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "operator.nk"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	clitest.Run(t, []cliCase{
		{"help agent lists enroll and revoke", []string{"help", "agent"}, 0, "  agent revoke", ""},
		{"help nats init", []string{"help", "nats", "init"}, 0, "Usage: edgecoord nats init [flags]", ""},
		{"nats init without --dir", []string{"nats", "init"}, 2, "", "--dir is required"},
		{"nats init over keys", []string{"nats", "init", "--dir", used}, 1, "", "is not empty"},
		{"enroll a bad name", []string{"agent", "enroll", "pc 1", "-c", cfg}, 2, "", "NAME: "},
		{"enroll with a long expiry", []string{"agent", "enroll", "pc-1", "--expires", "721h", "-c", cfg}, 2, "", "--expires: must be positive and at most 720h"},
		{"enroll without enrollment", []string{"agent", "enroll", "pc-1", "-c", cfg}, 2, "", "enrollment.nats_dir is not set"},
		{"revoke a bad name", []string{"agent", "revoke", "pc/1", "-c", cfg}, 2, "", "NAME: "},
	}, runCLI)
}
