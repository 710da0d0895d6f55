package e2e

import (
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SuperviseOptions are how a Supervisor restarts its command.
type SuperviseOptions struct {
	// PreventExit lists the exit statuses after which the command is not
	// started again (systemd's RestartPreventExitStatus; edgeagent's unit
	// lists 2, an invalid config).
	PreventExit []int
}

// Supervisor runs a command again whenever it exits, as the service
// manager runs edgeagent (the systemd unit's Restart=, the Windows
// service's recovery actions), until the test stops it. Every process
// started is kept, with its log.
type Supervisor struct {
	c    Command
	opts SuperviseOptions

	mu      sync.Mutex
	procs   []*Process
	stopped bool
	changed chan struct{} // closed and replaced on every start and exit
	done    chan struct{} // closed when the supervisor gave up or was stopped
	err     error         // a start that failed
}

// Supervise starts c under a Supervisor. At the end of the test the
// supervisor stops and its last process is killed; when the test failed,
// every process's log is printed.
func Supervise(t testing.TB, c Command, opts SuperviseOptions) *Supervisor {
	t.Helper()
	s := &Supervisor{c: c, opts: opts, changed: make(chan struct{}), done: make(chan struct{})}
	p, err := start(c)
	if err != nil {
		t.Fatal(err)
	}
	s.procs = append(s.procs, p)
	go s.loop(p)
	t.Cleanup(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.Current().Kill()
		<-s.done
		if t.Failed() {
			for _, p := range s.Processes() {
				p.logTo(t)
			}
		}
	})
	return s
}

func (s *Supervisor) loop(p *Process) {
	defer close(s.done)
	for {
		<-p.Done()
		s.mu.Lock()
		s.notifyLocked()
		if s.stopped || slices.Contains(s.opts.PreventExit, p.ExitCode()) {
			s.mu.Unlock()
			return
		}
		next, err := start(s.c)
		if err != nil {
			s.err = err
			s.mu.Unlock()
			return
		}
		s.procs = append(s.procs, next)
		s.notifyLocked()
		s.mu.Unlock()
		p = next
	}
}

func (s *Supervisor) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Current is the process started last.
func (s *Supervisor) Current() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[len(s.procs)-1]
}

// Processes are the processes started so far, oldest first.
func (s *Supervisor) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// Exits are the exit statuses of the processes that have exited, in
// order.
func (s *Supervisor) Exits() []int {
	var out []int
	for _, p := range s.Processes() {
		if p.Exited() {
			out = append(out, p.ExitCode())
		}
	}
	return out
}

// WaitStarts waits until the command has been started n times in all and
// returns the n-th process; it fails the test when the supervisor gives up
// first or after WaitTimeout.
func (s *Supervisor) WaitStarts(t testing.TB, n int) *Process {
	t.Helper()
	timeout := time.After(WaitTimeout)
	for {
		s.mu.Lock()
		procs, ch, err := s.procs, s.changed, s.err
		s.mu.Unlock()
		switch {
		case len(procs) >= n:
			return procs[n-1]
		case err != nil:
			t.Fatalf("supervisor: %v", err)
		}
		select {
		case <-ch:
		case <-s.done:
			if len(s.Processes()) < n {
				t.Fatalf("%s was started %d times, then not again (exits %v); waited for start %d", s.c.name(), len(procs), s.Exits(), n)
			}
		case <-timeout:
			t.Fatalf("%s was started %d times within %v (exits %v); waited for start %d", s.c.name(), len(procs), WaitTimeout, s.Exits(), n)
		}
	}
}

// Stop stops restarting the command, sends SIGTERM to the running process
// and returns its exit status.
func (s *Supervisor) Stop(t testing.TB) int {
	t.Helper()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	p := s.Current()
	if !p.Exited() {
		p.Signal(t, syscall.SIGTERM)
	}
	return p.Wait(t)
}
