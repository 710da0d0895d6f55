package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/clitest"
)

// TestEnrollCommandLine: edgeagent enroll refuses a malformed or mistyped
// code, a bad --coordinator and an existing config with exit 2 before
// sending anything, and writes nothing; a coordinator that cannot be
// reached is exit 1.
func TestEnrollCommandLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	existing := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(existing, []byte("agent_id: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const good = "0000-0000-0000-0000" // the check character of fifteen zeros is 0
	clitest.Run(t, []cliCase{
		{"help enroll", []string{"help", "enroll"}, 0, "Usage: edgeagent enroll [flags] CODE", ""},
		{"malformed code", []string{"enroll", "--coordinator", "https://fleet.example.com", "ABCD", "-c", cfg}, 2, "", "CODE: an enrollment code is 16 characters"},
		{"mistyped code", []string{"enroll", "--coordinator", "https://fleet.example.com", "0000-0000-0000-0001", "-c", cfg}, 2, "", "CODE: the enrollment code's check character does not match"},
		{"no coordinator", []string{"enroll", good, "-c", cfg}, 2, "", "--coordinator: want the coordinator's API URL"},
		{"coordinator not a URL", []string{"enroll", "--coordinator", "fleet.example.com", good, "-c", cfg}, 2, "", "--coordinator: want the coordinator's API URL"},
		{"existing config", []string{"enroll", "--coordinator", "https://fleet.example.com", good, "-c", existing}, 2, "", existing + " exists"},
		{"unreachable coordinator", []string{"enroll", "--coordinator", "http://127.0.0.1:1", good, "-c", cfg}, 1, "", "edgeagent: enroll: "},
	}, runCLI)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused enrollments left %v", entries)
	}
}
