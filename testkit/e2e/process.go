package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// WaitTimeout is how long Wait, MustCleanShutdown and the readiness checks
// wait before they fail the test: a guard against a hung process, not a
// measure of how fast it is.
const WaitTimeout = 60 * time.Second

// logShown is how much of a process's output a failed test prints.
const logShown = 64 << 10

// Command is a command line to run.
type Command struct {
	// Path is the program; Args its arguments.
	Path string
	Args []string
	// Env is added to the test process's environment.
	Env []string
	// ExactEnv, when set, is the whole environment instead.
	ExactEnv []string
	// Dir is the working directory; default the test's.
	Dir string
	// Name names the process in failures and logs; default the program's
	// base name and the arguments.
	Name string
}

func (c Command) name() string {
	if c.Name != "" {
		return c.Name
	}
	return strings.TrimSpace(filepath.Base(c.Path) + " " + strings.Join(c.Args, " "))
}

func (c Command) cmd(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Dir = c.Dir
	switch {
	case c.ExactEnv != nil:
		cmd.Env = c.ExactEnv
	case c.Env != nil:
		cmd.Env = append(os.Environ(), c.Env...)
	}
	return cmd
}

// Run runs c to its end and returns what it printed and its exit status.
func Run(t testing.TB, c Command) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	cmd := c.cmd(ctx)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("%s: %v (stderr %q)", c.name(), err, errOut.String())
	}
	return out.String(), errOut.String(), code
}

// Process is a long-running process started by Start. Its standard output
// and error go to one log, kept for the test.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *testenv.LockedBuffer
	done chan struct{}
}

// Start starts c and returns its handle. A process still running at the
// end of the test is killed; its log is printed when the test failed.
func Start(t testing.TB, c Command) *Process {
	t.Helper()
	p, err := start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.logTo(t)
		}
	})
	return p
}

// start starts c; the caller kills the process.
func start(c Command) (*Process, error) {
	p := &Process{name: c.name(), cmd: c.cmd(context.Background()), out: &testenv.LockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// logTo prints the end of what p printed to the test log.
func (p *Process) logTo(t testing.TB) {
	s := p.Log()
	if len(s) > logShown {
		s = "…" + s[len(s)-logShown:]
	}
	t.Logf("%s printed:\n%s", p.name, s)
}

// ExitCode is the exit status of a process that has exited, -1 before.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Name is the process's name in failures.
func (p *Process) Name() string { return p.name }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// Kill kills the process, if it still runs, and waits for it to exit.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Wait waits for the process to exit and returns its exit status; it fails
// the test after WaitTimeout.
func (p *Process) Wait(t testing.TB) int {
	t.Helper()
	return p.WaitWithin(t, WaitTimeout)
}

// WaitWithin is Wait failing after d, for a test where an exit within d is
// the behaviour checked (a second signal stops at once, well before the
// drain would end).
func (p *Process) WaitWithin(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.name, d)
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stop sends SIGTERM and returns the exit status (Wait).
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	return p.Wait(t)
}

// crashed matches what the Go runtime prints when a program panics, dies
// or, built with -race, finds a data race.
var crashed = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE)`)

// MustCleanShutdown sends SIGTERM and fails the test unless the process
// exits with status 0 within WaitTimeout and its log has no panic, fatal
// error or race report.
func (p *Process) MustCleanShutdown(t testing.TB) {
	t.Helper()
	if code := p.Stop(t); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", p.name, code)
	}
	if loc := crashed.FindStringIndex(p.Log()); loc != nil {
		log := p.Log()
		t.Fatalf("%s logged a crash:\n%s", p.name, log[loc[0]:min(len(log), loc[0]+4000)])
	}
}

// Log is everything the process printed so far.
func (p *Process) Log() string { return p.out.String() }

// Lines are the lines the process printed so far.
func (p *Process) Lines() []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// Tail is the last n lines.
func (p *Process) Tail(n int) []string {
	l := p.Lines()
	return l[max(0, len(l)-n):]
}

// Grep is the lines containing s.
func (p *Process) Grep(s string) []string {
	var out []string
	for _, l := range p.Lines() {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Entries are the JSON log lines (zerolog) whose message is msg.
func (p *Process) Entries(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range p.Lines() {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) == nil && e["message"] == msg {
			out = append(out, e)
		}
	}
	return out
}

// WaitForLine waits until the process prints a line match accepts and
// returns it; it fails the test when the process exits first or after
// WaitTimeout.
func (p *Process) WaitForLine(t testing.TB, what string, match func(line string) bool) string {
	t.Helper()
	var found string
	testenv.Eventually(t, WaitTimeout, p.name+": "+what, func() bool {
		exited := p.Exited() // before reading: a line printed before the exit counts
		for _, l := range p.Lines() {
			if match(l) {
				found = l
				return true
			}
		}
		if exited {
			t.Fatalf("%s exited (status %d) before %s", p.name, p.cmd.ProcessState.ExitCode(), what)
		}
		return false
	})
	return found
}

// WaitForEntry waits for a JSON log line with message msg (Entries) and
// returns it.
func (p *Process) WaitForEntry(t testing.TB, msg string) map[string]any {
	t.Helper()
	var e map[string]any
	p.WaitForLine(t, "log line "+msg, func(l string) bool {
		return json.Unmarshal([]byte(l), &e) == nil && e["message"] == msg
	})
	return e
}
