// Package clitest runs tables of command lines against a program built on
// internal/cli, for the tests of edgeagent, edgecoord and edgelab.
package clitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Case is one command line and what it must do.
type Case struct {
	Name   string
	Args   []string
	Code   int    // exit status
	Stdout string // substring; "" means stdout must be empty
	Stderr string // substring; "" means stderr must be empty
}

// CaseOf is Case or a type of the test's own defined as Case
// (type cliCase clitest.Case), whose table may then be written without
// field names.
type CaseOf interface {
	~struct {
		Name   string
		Args   []string
		Code   int
		Stdout string
		Stderr string
	}
}

// Run runs every case as a subtest with run, which executes a command line
// and returns its exit status and output.
func Run[C CaseOf](t *testing.T, cases []C, run func(t *testing.T, args ...string) (code int, stdout, stderr string)) {
	t.Helper()
	for _, c := range cases {
		tc := Case(c)
		t.Run(tc.Name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.Args...)
			if code != tc.Code {
				t.Errorf("exit status = %d, want %d", code, tc.Code)
			}
			Contains(t, "stdout", stdout, tc.Stdout)
			Contains(t, "stderr", stderr, tc.Stderr)
		})
	}
}

// Contains checks that got contains want, or is empty when want is.
func Contains(t *testing.T, what, got, want string) {
	t.Helper()
	if want == "" && got != "" || !strings.Contains(got, want) {
		t.Errorf("%s = %q, want it to contain %q", what, got, want)
	}
}

// WriteFile writes content to a file name (0600) in a temporary directory
// of the test and returns its path.
func WriteFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
