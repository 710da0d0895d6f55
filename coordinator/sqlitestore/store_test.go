package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/coordinator/storetest"
	"github.com/edgeagent/edgeagent/protocol"
)

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path)
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

// TestStore runs the store contract suite, each subtest on a fresh, empty
// store of its own: a copy of one database migrated and closed before the
// subtests start. Migrating a new database for every subtest took some
// 40 % of the suite's CPU time under the race detector; TestReopen and the
// opener tests migrate new files.
func TestStore(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.db")
	s, err := sqlitestore.Open(t.Context(), empty)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Closed, the database is all in its main file.
	if _, err := os.Stat(empty + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("write-ahead log left by the closed empty database: %v", err)
	}
	schema, err := os.ReadFile(empty)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) sqlstore.Lab {
		path := filepath.Join(t.TempDir(), "jobs.db")
		if err := os.WriteFile(path, schema, 0o600); err != nil {
			t.Fatal(err)
		}
		return open(t, path)
	})
}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "kept", Task: task}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if _, err := s.Get(ctx, "kept"); err != nil {
		t.Fatalf("job lost across reopen: %v", err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != 17 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	var mode string
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlitestore.Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("open of a database migrated by a newer binary succeeded")
	}
}

// opener opens stores for the shared open and migration tests.
func opener() storetest.Opener {
	withDB := func(path string, fn func(db *sql.DB) error) error {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return err
		}
		return errors.Join(fn(db), db.Close())
	}
	return storetest.Opener{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "jobs.db") },
		Open: func(ctx context.Context, path string) (jobstore.Store, error) {
			return sqlitestore.Open(ctx, path)
		},
		OpenExisting: func(ctx context.Context, path string) (jobstore.Store, error) {
			s, err := sqlitestore.OpenExisting(ctx, path)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Count: func(ctx context.Context, path, query string) (n int64, err error) {
			if _, err := os.Stat(path); err != nil {
				return 0, err // sql.Open would create the file
			}
			err = withDB(path, func(db *sql.DB) error { return db.QueryRowContext(ctx, query).Scan(&n) })
			return n, err
		},
		Exec: func(ctx context.Context, path, query string) error {
			return withDB(path, func(db *sql.DB) error { _, err := db.ExecContext(ctx, query); return err })
		},
	}
}

func TestOpenExisting(t *testing.T) {
	storetest.RunOpen(t, opener())
	// A missing file is an empty database, and it is not created.
	path := filepath.Join(t.TempDir(), "missing.db")
	if _, err := sqlitestore.OpenExisting(t.Context(), path); !errors.Is(err, jobstore.ErrSchemaOutdated) {
		t.Fatalf("open existing of a missing file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open existing created %s: %v", path, err)
	}
}

func TestOpenRejectsNonFilePaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if s, err := sqlitestore.Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("open %q succeeded", p)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "jobs.db"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.ClaimNext(ctx, "a/b", 1e9)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("claim with a canceled context: %v", err)
	}
}

func BenchmarkCommitFenced(b *testing.B) {
	storetest.BenchmarkCommit(b, open(b, filepath.Join(b.TempDir(), "jobs.db")), true)
}

func BenchmarkCommitUnfenced(b *testing.B) {
	storetest.BenchmarkCommit(b, open(b, filepath.Join(b.TempDir(), "jobs.db")), false)
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
