package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// compiles counts the statements the store's connections compile, the
// writer's and every reader's: SQLite asks the authorizer about what a
// statement does while it compiles the statement (and again whenever it
// has to compile it anew), never while it runs it. BEGIN, COMMIT and
// ROLLBACK, which the driver sends as text with every transaction, are
// not counted.
func compiles(t *testing.T, s *Store) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	count := func(action sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
		if action != sqlite.AuthTransaction {
			n.Add(1)
		}
		return sqlite.AuthorizerOK
	}
	authorize(t, s.w, 1, count)
	authorize(t, s.r, s.r.Stats().MaxOpenConnections, count)
	return &n
}

// authorize registers fn on conns connections of db, all it may open.
func authorize(t *testing.T, db *sql.DB, conns int, fn sqlite.AuthorizerFn) {
	t.Helper()
	var cs []*sql.Conn
	defer func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}()
	for range conns {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		err = c.Raw(func(dc any) error {
			ar, ok := dc.(sqlite.AuthorizerRegisterer)
			if !ok {
				return fmt.Errorf("%T has no authorizer", dc)
			}
			return ar.RegisterAuthorizer(fn)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// op is a store call run again and again: run(i) makes what its i-th run
// needs, sets the count to zero and makes the call.
type op struct {
	name string
	run  func(i int) error
}

// compileOnce runs each op warm times, which may compile its statements,
// and then three times more, which must compile none.
func compileOnce(t *testing.T, n *atomic.Int64, warm int, ops []op) {
	t.Helper()
	for _, op := range ops {
		for i := range warm {
			if err := op.run(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
		}
		for i := warm; i < warm+3; i++ {
			n.Store(0)
			if err := op.run(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			if got := n.Load(); got != 0 {
				t.Errorf("%s, run %d: compiled statements again (%d actions authorized)", op.name, i+1, got)
			}
		}
	}
}

func screenshotTask(serial string) protocol.Task {
	return protocol.Task{Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The scheduler's grant attempts (a job matching no phone of the agent, a
// job it gets, no expired lease to take over), a renewal and a
// reassignment run statements the store prepared when it opened: after
// their first run, running them again compiles nothing.
func TestGrantsCompileNoStatementAgain(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	task := screenshotTask
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
	compileOnce(t, n, 1, []op{ // the first run compiles what is not prepared yet
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
	})
}

// The grants, the reassignment and the renewal are prepared when the store
// opens, so the first of each compiles nothing (the stop path,
// docs/design.md). Registering the authorizer makes SQLite compile every
// statement of the connection again, so the writer's statements are
// prepared anew after it, as Open prepares them.
func TestFirstGrantCompilesNothing(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	n := compiles(t, s)
	if err := s.wc.close(); err != nil {
		t.Fatal(err)
	}
	s.wc = newStmtCache(s.w)
	if err := s.wc.prepare(ctx, preparedSQL...); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p1", "p2"} { // a submit's write event is a grant's too
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: screenshotTask(id)}); err != nil {
			t.Fatal(err)
		}
	}
	const ttl = time.Minute
	agent := fencing.Owner("a1", "boot1")
	var held jobstore.Lease
	for _, op := range []op{
		{"grant", func(int) error {
			var err error
			held, err = s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: agent, Devices: []protocol.Device{{Serial: "p1", State: protocol.DeviceReady}}, Slots: 10, TTL: ttl})
			return err
		}},
		{"take-over attempt without an expired lease", func(int) error {
			_, _, err := s.TakeOverExpired(ctx, jobstore.ClaimRequest{Owner: agent, Devices: []protocol.Device{{Serial: "p2", State: protocol.DeviceReady}}, Slots: 10, TTL: ttl})
			if !errors.Is(err, jobstore.ErrNoJob) {
				return fmt.Errorf("want no job, got %v", err)
			}
			return nil
		}},
		{"claim", func(int) error {
			_, err := s.Claim(ctx, "p2", agent, ttl)
			return err
		}},
		{"reassignment", func(int) error {
			_, err := s.Reassign(ctx, "p2", fencing.Owner("a2", "boot1"), ttl)
			return err
		}},
		{"renewal", func(int) error {
			_, err := s.Renew(ctx, held.Token, ttl)
			return err
		}},
	} {
		n.Store(0)
		if err := op.run(0); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if got := n.Load(); got != 0 {
			t.Errorf("first %s: compiled statements (%d actions authorized)", op.name, got)
		}
	}
}

// The other frequent calls of a running coordinator (an agent's heartbeat,
// renewal, artifact and result, the reads of a job, the reaper's sweep)
// compile their statements once and then run them prepared. The first run
// compiles them: a read prepares its statement, a write runs a statement
// new to the cache unprepared and prepares it once the transaction has
// ended. The second may compile some once more: SQLite compiles again, on
// its first run with values bound, a statement it prepared without them
// whose plan depends on them (a LIMIT ?, say). From then on nothing is
// compiled.
func TestFrequentStatementsCompileOnce(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	const ttl = time.Minute
	agent := fencing.Owner("a1", "boot1")
	phone := protocol.Device{Serial: "held", State: protocol.DeviceReady}
	if _, _, err := s.AgentHello(ctx, jobstore.AgentHello{AgentID: "a1", BootID: "boot1", Devices: []protocol.Device{phone}, Slots: 100}); err != nil {
		t.Fatal(err)
	}
	// claim submits a job, with one attempt, for a phone of its own name
	// and grants it to the agent.
	claim := func(id string, ttl time.Duration) (jobstore.Lease, error) {
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: screenshotTask(id), MaxAttempts: 1}); err != nil {
			return jobstore.Lease{}, err
		}
		l, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: agent, Devices: []protocol.Device{{Serial: id, State: protocol.DeviceReady}}, Slots: 100, TTL: ttl})
		if err == nil && l.Token.JobID != id {
			err = fmt.Errorf("granted %s, want %s", l.Token.JobID, id)
		}
		return l, err
	}
	held, err := claim("held", ttl)
	if err != nil {
		t.Fatal(err)
	}
	n := compiles(t, s)
	compileOnce(t, n, 2, []op{
		{"heartbeat", func(int) error {
			_, err := s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "a1", BootID: "boot1", Devices: []protocol.Device{phone}})
			return err
		}},
		{"renewal", func(int) error {
			_, err := s.Renew(ctx, held.Token, ttl)
			return err
		}},
		{"artifact registration", func(i int) error {
			name := fmt.Sprintf("shot-%d.png", i)
			return s.RegisterArtifact(ctx, held.Token, jobstore.ArtifactRecord{Name: name, Key: "k/" + name, Size: 10,
				SHA256: fmt.Sprintf("%064d", i), ContentType: "image/png"})
		}},
		{"upload authorization", func(i int) error {
			return s.AuthorizeUpload(ctx, held.Token, fmt.Sprintf("dump-%d.xml", i))
		}},
		{"result commit with an observation", func(i int) error {
			l, err := claim(fmt.Sprintf("done-%d", i), ttl)
			if err != nil {
				return err
			}
			if err := s.RegisterArtifact(ctx, l.Token, jobstore.ArtifactRecord{Name: "s.png", Key: "k", Size: 1, SHA256: "00"}); err != nil {
				return err
			}
			n.Store(0) // what the claim and the artifact compiled does not count
			keys, err := s.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: json.RawMessage(`{"ok":true}`),
				Observations: []protocol.Observation{{Step: 1, Name: "price", Raw: "¥100", Value: "100", Parse: protocol.ParsePrice, Currency: "JPY"}}})
			if err == nil && len(keys) != 1 {
				err = fmt.Errorf("manifest %v, want one key", keys)
			}
			return err
		}},
		{"job read", func(int) error {
			j, err := s.Get(ctx, "held")
			if err == nil && j.Status != jobstore.StatusInProgress {
				err = fmt.Errorf("job is %s", j.Status)
			}
			return err
		}},
		{"reaper sweep", func(i int) error {
			id := fmt.Sprintf("lapsed-%d", i)
			if _, err := claim(id, time.Millisecond); err != nil {
				return err
			}
			for {
				expired, err := s.ExpiredLeases(ctx)
				if err != nil {
					return err
				}
				if expired > 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			n.Store(0) // what the claim compiled does not count
			if _, err := s.ExpiredLeases(ctx); err != nil {
				return err
			}
			toks, err := s.ReclaimExpired(ctx, 100)
			if err == nil && (len(toks) != 1 || toks[0].JobID != id) {
				err = fmt.Errorf("reclaimed %v, want %s", toks, id)
			}
			if err != nil {
				return err
			}
			_, err = s.ExpireDeadlines(ctx, 100)
			return err
		}},
	})
}

// Each cache holds at most stmtCacheSize statements: texts built for their
// arguments (here IN lists of every length) run unprepared once it is
// full, and the calls still answer. A text that does not compile is not
// cached, and its caller sees SQLite's error.
func TestStatementCacheIsBounded(t *testing.T) {
	defer func(n int) { stmtCacheSize = n }(stmtCacheSize)
	stmtCacheSize = 24
	ctx := t.Context()
	s := openTemp(t)
	for _, q := range preparedSQL {
		if s.wc.stmts[q] == nil {
			t.Errorf("not prepared when the store opened: %.60s", q)
		}
	}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "j1", Task: screenshotTask("")}); err != nil {
		t.Fatal(err)
	}
	statuses := []string{jobstore.StatusQueued}
	for i := range 3 * stmtCacheSize {
		jobs, err := s.ListJobs(ctx, jobstore.JobFilter{Statuses: statuses})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("list %d: %d jobs, %v", i, len(jobs), err)
		}
		statuses = append(statuses, jobstore.StatusInProgress)
		err = s.write(ctx, func(tx txn) error {
			res, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE jobs SET priority = %d WHERE id = 'j1'`, i))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("updated %d rows, %v", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for name, c := range map[string]*stmtCache{"writer": s.wc, "readers": s.rc} {
		c.mu.Lock()
		cached, pending := len(c.stmts), len(c.pending)
		c.mu.Unlock()
		if cached != stmtCacheSize || pending != 0 {
			t.Errorf("%s: %d statements cached and %d pending, want %d and none", name, cached, pending, stmtCacheSize)
		}
	}
	// Full: a write whose statements are not cached runs as before,
	// compiling them every time.
	n := compiles(t, s)
	for i := range 2 {
		n.Store(0)
		if _, err := s.Cancel(ctx, "j1", "enough"); err != nil && !errors.Is(err, jobstore.ErrConflict) {
			t.Fatal(err)
		}
		if n.Load() == 0 {
			t.Errorf("cancellation %d compiled nothing, with its statements not cached", i+1)
		}
	}

	wantErr := func(err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "no such table: nowhere") {
			t.Errorf("got %v, want SQLite's error", err)
		}
	}
	s = openTemp(t)
	var x int
	wantErr(s.rc.QueryRowContext(ctx, `SELECT x FROM nowhere`).Scan(&x))
	wantErr(s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `UPDATE nowhere SET x = 1`)
		return err
	}))
	if s.rc.stmts[`SELECT x FROM nowhere`] != nil || s.wc.stmts[`UPDATE nowhere SET x = 1`] != nil {
		t.Error("a text that does not compile is cached")
	}
}
