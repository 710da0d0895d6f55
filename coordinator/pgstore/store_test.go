package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/coordinator/storetest"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestMain keeps one throwaway PostgreSQL cluster for the whole binary.
func TestMain(m *testing.M) { testenv.Main(m) }

func open(t testing.TB, dsn string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// withPool sets the pool size, so the races of the suite reach the server
// with more than the default handful of connections.
func withPool(dsn string, n int) string {
	if !strings.Contains(dsn, "://") {
		return fmt.Sprintf("%s pool_max_conns=%d", dsn, n)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", dsn, sep, n)
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sqlstore.Lab {
		return open(t, withPool(testenv.Postgres(t), 16))
	})
}

var task = protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	dsn := testenv.Postgres(t)
	s, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "kept", Task: task}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dsn)
	if _, err := s.Get(ctx, "kept"); err != nil {
		t.Fatalf("job lost across reopen: %v", err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != 17 {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := t.Context()
	dsn := testenv.Postgres(t)
	open(t, dsn)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	if s, err := pgstore.Open(ctx, dsn); err == nil {
		s.Close()
		t.Fatal("open of a database migrated by a newer binary succeeded")
	}
}

// opener opens stores for the shared open and migration tests.
func opener() storetest.Opener {
	withConn := func(ctx context.Context, dsn string, fn func(c *pgx.Conn) error) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		return errors.Join(fn(c), c.Close(ctx))
	}
	return storetest.Opener{
		Fresh: func(t *testing.T) string { return testenv.Postgres(t) },
		Open: func(ctx context.Context, dsn string) (jobstore.Store, error) {
			return pgstore.Open(ctx, dsn)
		},
		OpenExisting: func(ctx context.Context, dsn string) (jobstore.Store, error) {
			s, err := pgstore.OpenExisting(ctx, dsn)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Count: func(ctx context.Context, dsn, query string) (n int64, err error) {
			err = withConn(ctx, dsn, func(c *pgx.Conn) error { return c.QueryRow(ctx, query).Scan(&n) })
			return n, err
		},
		Exec: func(ctx context.Context, dsn, query string) error {
			return withConn(ctx, dsn, func(c *pgx.Conn) error { _, err := c.Exec(ctx, query); return err })
		},
	}
}

func TestOpenExisting(t *testing.T) {
	storetest.RunOpen(t, opener())
}

// Several coordinators starting at once on an empty database migrate it
// once.
func TestConcurrentOpen(t *testing.T) {
	dsn := testenv.Postgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(t.Context(), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
}

// Several coordinators (separate pools) claiming from one database never
// grant a job twice, and together drain the queue.
func TestClaimNextConcurrentCoordinators(t *testing.T) {
	ctx := t.Context()
	dsn := testenv.Postgres(t)
	const jobs, coordinators, workers = 60, 3, 4
	stores := make([]*pgstore.Store, coordinators)
	for i := range stores {
		stores[i] = open(t, dsn)
	}
	for i := range jobs {
		if _, err := stores[0].Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("j%03d", i), Task: task}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		granted = map[string]string{}
		wg      sync.WaitGroup
	)
	for c, s := range stores {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fencing.Owner(fmt.Sprintf("agent-%d-%d", c, w), "boot")
				for {
					l, err := s.ClaimNext(ctx, owner, time.Minute)
					if errors.Is(err, jobstore.ErrNoJob) {
						return
					}
					if err != nil {
						t.Errorf("claim next: %v", err)
						return
					}
					mu.Lock()
					if prev, dup := granted[l.Token.JobID]; dup {
						t.Errorf("job %s granted to %s and %s", l.Token.JobID, prev, owner)
					}
					granted[l.Token.JobID] = owner
					mu.Unlock()
					if l.Token.Generation != 1 {
						t.Errorf("job %s granted at generation %d", l.Token.JobID, l.Token.Generation)
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(granted) != jobs {
		t.Fatalf("%d of %d jobs granted", len(granted), jobs)
	}
}

func benchStore(b *testing.B) *pgstore.Store {
	return open(b, testenv.Postgres(b))
}

// BenchmarkCommitFenced and BenchmarkCommitUnfenced compare the fenced result
// write with the same write without the token (docs/design.md: overhead ≤ 3%).
func BenchmarkCommitFenced(b *testing.B) {
	storetest.BenchmarkCommit(b, benchStore(b), true)
}

func BenchmarkCommitUnfenced(b *testing.B) {
	storetest.BenchmarkCommit(b, benchStore(b), false)
}

// TestMigrateEndStates: a database at schema 3 holding a cancelled job and
// one waiting on an effect decision shows CANCELLED and NEEDS_DECISION once
// migrated.
func TestMigrateEndStates(t *testing.T) {
	storetest.RunMigrateEndStates(t, opener(), os.DirFS("."))
}

func TestMigrateDenials(t *testing.T) {
	storetest.RunMigrateDenials(t, opener(), os.DirFS("."))
}

// TestMigrateObservations: a database at schema 10 with a running job
// takes its result with observations once migrated.
func TestMigrateObservations(t *testing.T) {
	storetest.RunMigrateObservations(t, opener(), os.DirFS("."))
}

// TestMigratePhonePlatform: the observations of a database at schema 16
// are android, with no OS version, once migrated.
func TestMigratePhonePlatform(t *testing.T) {
	storetest.RunMigratePhonePlatform(t, opener(), os.DirFS("."))
}
