package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// Opener opens one kind of store, for RunOpen.
type Opener struct {
	// Fresh returns the location (path or dsn) of a new, empty database.
	Fresh func(t *testing.T) string
	// Open opens the store at a location and migrates its schema;
	// OpenExisting opens it without migrating.
	Open, OpenExisting func(ctx context.Context, location string) (jobstore.Store, error)
	// Count runs a query returning one integer on the database at location,
	// outside the store.
	Count func(ctx context.Context, location, query string) (int64, error)
	// Exec runs a statement on the database at location, outside the store.
	Exec func(ctx context.Context, location, query string) error
}

// RunOpen checks that migrations are explicit: OpenExisting refuses a
// database whose schema is behind this binary (empty included) with
// jobstore.ErrSchemaOutdated, and one whose schema is ahead of it, and
// writes nothing doing so; after Open it opens the store as it is.
func RunOpen(t *testing.T, o Opener) {
	ctx := t.Context()
	openExisting := func(loc string) (jobstore.Store, error) {
		s, err := o.OpenExisting(ctx, loc)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}

	t.Run("Fresh", func(t *testing.T) {
		loc := o.Fresh(t)
		_, err := openExisting(loc)
		if !errors.Is(err, jobstore.ErrSchemaOutdated) {
			t.Fatalf("open existing of an empty database: err = %v, want ErrSchemaOutdated", err)
		}
		if !strings.Contains(err.Error(), "edgecoord migrate") {
			t.Errorf("error %q does not say to run edgecoord migrate", err)
		}
		if n, err := o.Count(ctx, loc, `SELECT count(*) FROM schema_migrations`); err == nil {
			t.Errorf("open existing created schema_migrations (%d rows)", n)
		}
	})

	t.Run("AfterOpen", func(t *testing.T) {
		loc := o.Fresh(t)
		s, err := o.Open(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "kept", Task: testTask()}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		migrations, err := o.Count(ctx, loc, `SELECT count(*) FROM schema_migrations`)
		if err != nil {
			t.Fatal(err)
		}
		s, err = openExisting(loc)
		if err != nil {
			t.Fatalf("open existing after open: %v", err)
		}
		if _, err := s.Get(ctx, "kept"); err != nil {
			t.Fatalf("open existing: %v", err)
		}
		s.Close()

		// One migration forgotten: the schema is behind. Open existing
		// refuses it and does not apply the migration.
		if err := o.Exec(ctx, loc, `DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`); err != nil {
			t.Fatal(err)
		}
		if _, err := openExisting(loc); !errors.Is(err, jobstore.ErrSchemaOutdated) {
			t.Fatalf("open existing of a schema one version behind: err = %v, want ErrSchemaOutdated", err)
		}
		if n, err := o.Count(ctx, loc, `SELECT count(*) FROM schema_migrations`); err != nil || n != migrations-1 {
			t.Fatalf("after open existing: %d migrations recorded, %v; want %d (nothing applied)", n, err, migrations-1)
		}
	})

	t.Run("Newer", func(t *testing.T) {
		loc := o.Fresh(t)
		s, err := o.Open(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := o.Exec(ctx, loc, `INSERT INTO schema_migrations (version, name) VALUES (999999, 'future')`); err != nil {
			t.Fatal(err)
		}
		_, err = openExisting(loc)
		if err == nil || errors.Is(err, jobstore.ErrSchemaOutdated) {
			t.Fatalf("open existing of a newer schema: err = %v, want an error that is not ErrSchemaOutdated", err)
		}
		if !strings.Contains(err.Error(), "newer") {
			t.Errorf("error %q does not say a newer binary migrated the database", err)
		}
	})
}
