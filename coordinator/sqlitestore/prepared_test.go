package sqlitestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// compiles counts the statements the writer connection compiles that read
// the jobs table: SQLite asks the authorizer about every column a
// statement reads while it compiles the statement (and again whenever it
// has to compile it anew), never while it runs it.
func compiles(t *testing.T, s *Store) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	conn, err := s.w.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		ar, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return fmt.Errorf("%T has no authorizer", dc)
		}
		return ar.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, table, _, _, _ string) sqlite.AuthorizerReturnCode {
			if action == sqlite.AuthRead && table == "jobs" {
				n.Add(1)
			}
			return sqlite.AuthorizerOK
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return &n
}

// The scheduler's grant attempts (a job matching no phone of the agent, a
// job it gets, no expired lease to take over), a renewal and a
// reassignment run statements the store prepared when it opened: after
// their first run, running them again compiles nothing.
func TestGrantsCompileNoStatementAgain(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	task := func(serial string) protocol.Task {
		return protocol.Task{Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	}
	const ttl = time.Minute
	agent := fencing.Owner("a1", "boot1")
	var phones []protocol.Device // one for each grant below
	for i := range 4 {
		phones = append(phones, protocol.Device{Serial: fmt.Sprintf("p%d", i), State: protocol.DeviceReady})
	}
	req := jobstore.ClaimRequest{Owner: agent, Devices: phones, Slots: 1000, TTL: ttl}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "elsewhere", Task: task("other")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "held", Task: task("")}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Claim(ctx, "held", fencing.Owner("b1", "boot1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	n := compiles(t, s)
	ops := []struct {
		name string
		run  func(i int) error
	}{
		{"grant attempt matching no phone", func(int) error {
			_, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: agent, Devices: []protocol.Device{{Serial: "none", State: protocol.DeviceReady}}, Slots: 1000, TTL: ttl})
			if !errors.Is(err, jobstore.ErrNoJob) {
				return fmt.Errorf("want no job, got %v", err)
			}
			return nil
		}},
		{"grant", func(i int) error {
			id := fmt.Sprintf("job-%d", i)
			if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task(phones[i].Serial)}); err != nil {
				return err
			}
			n.Store(0) // what Submit compiled does not count
			l, err := s.ClaimFor(ctx, req)
			if err == nil && l.Token.JobID != id {
				err = fmt.Errorf("granted %s, want %s", l.Token.JobID, id)
			}
			return err
		}},
		{"take-over attempt without an expired lease", func(int) error {
			_, _, err := s.TakeOverExpired(ctx, req)
			if !errors.Is(err, jobstore.ErrNoJob) {
				return fmt.Errorf("want no job, got %v", err)
			}
			return nil
		}},
		{"renewal", func(int) error {
			_, err := s.Renew(ctx, held.Token, ttl)
			return err
		}},
		{"reassignment", func(i int) error {
			held, err = s.Reassign(ctx, "held", fencing.Owner(fmt.Sprintf("b%d", i%2), "boot1"), ttl)
			return err
		}},
	}
	for _, op := range ops {
		if err := op.run(0); err != nil { // compiles what is not prepared yet
			t.Fatalf("%s: %v", op.name, err)
		}
		for i := 1; i <= 3; i++ {
			n.Store(0)
			if err := op.run(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			if got := n.Load(); got != 0 {
				t.Errorf("%s, run %d: compiled statements reading jobs again (%d columns authorized)", op.name, i+1, got)
			}
		}
	}
}
