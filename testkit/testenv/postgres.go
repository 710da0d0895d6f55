package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/testkit/pgcluster"
)

// EnvPostgresURL points the tests at an existing PostgreSQL server instead of
// a throwaway cluster. The role in it must be allowed to create databases.
const EnvPostgresURL = "EDGE_TEST_POSTGRES_URL"

// pgShared is the test binary's throwaway cluster.
var pgShared struct {
	sync.Mutex
	keep    bool               // set by Main: the cluster lives until StopPostgres
	refs    int                // Postgres calls whose test has not ended
	c       *pgcluster.Cluster // nil when not running
	missing string             // why PostgreSQL cannot run here
	err     error              // start failure, kept so later tests fail fast
}

var pgDatabases atomic.Int64

// Postgres returns the DSN of a fresh, empty database that is dropped when
// the test ends.
//
// With EDGE_TEST_POSTGRES_URL set, the database is created on that server
// under a name unique to this test binary and call. Otherwise a throwaway
// cluster is started in a temp directory with initdb (binaries from PATH or
// the highest version under /usr/lib/postgresql/*/bin), listening on a random
// loopback port with fsync off and its socket in that directory; as root it
// runs as the postgres user through runuser, on a directory that user owns.
// One cluster serves every test of the binary that runs while it is up:
//
//   - In a package whose TestMain calls Main (or StopPostgres after m.Run),
//     the cluster is started once and stopped when the tests are done.
//   - Without that, the cluster is stopped as soon as no running test holds a
//     database from it, and started again by the next call; that is correct
//     but costs a start (about 1.5 s) per sequential test.
//
// The server is also told to shut down when the test binary dies (parent
// death signal), and directories left by killed binaries are removed by the
// next start. Missing binaries skip the test, or fail it in CI.
func Postgres(t testing.TB) string {
	t.Helper()
	if base := os.Getenv(EnvPostgresURL); base != "" {
		name := fmt.Sprintf("edge_test_%d_%d_%s", os.Getpid(), pgDatabases.Add(1), pgRandHex(3))
		dsn, err := pgcluster.WithDatabase(base, name)
		if err != nil {
			t.Fatalf("%s: %v", EnvPostgresURL, err)
		}
		pgCreateDatabase(t, base, name)
		return dsn
	}
	c := pgAcquire(t)
	name := fmt.Sprintf("test_%d", pgDatabases.Add(1))
	pgCreateDatabase(t, c.DSN("postgres"), name)
	return c.DSN(name)
}

// Main runs the tests of a package with one PostgreSQL cluster for the whole
// test binary, stops it, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	pgShared.Lock()
	pgShared.keep = true
	pgShared.Unlock()
	code := m.Run()
	StopPostgres()
	os.Exit(code)
}

// StopPostgres stops the throwaway cluster, if one runs, and removes its
// directory. A TestMain that does not use Main calls it after m.Run.
func StopPostgres() {
	pgShared.Lock()
	defer pgShared.Unlock()
	if pgShared.c != nil {
		if err := pgShared.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop postgres: %v\n", err)
		}
		pgShared.c = nil
	}
}

// pgAcquire returns the running cluster, starting it if needed, and holds a
// reference to it until the test ends.
func pgAcquire(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	pgShared.Lock()
	defer pgShared.Unlock()
	if pgShared.c == nil && pgShared.missing == "" && pgShared.err == nil {
		pgShared.c, pgShared.err = pgcluster.Start(pgcluster.Options{})
		if errors.Is(pgShared.err, pgcluster.ErrNotFound) {
			pgShared.missing, pgShared.err = pgShared.err.Error(), nil
		}
	}
	if pgShared.missing != "" {
		Missing(t, "%s", pgShared.missing)
	}
	if pgShared.err != nil {
		t.Fatalf("start postgres: %v", pgShared.err)
	}
	pgShared.refs++
	t.Cleanup(pgRelease)
	return pgShared.c
}

func pgRelease() {
	pgShared.Lock()
	defer pgShared.Unlock()
	pgShared.refs--
	if pgShared.refs == 0 && !pgShared.keep && pgShared.c != nil {
		if err := pgShared.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop postgres: %v\n", err)
		}
		pgShared.c = nil
	}
}

// pgCreateDatabase creates database name through the admin DSN and drops it
// when the test ends.
func pgCreateDatabase(t testing.TB, admin, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
}

func pgRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
