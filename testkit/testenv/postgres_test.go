package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/testkit/pgcluster"
)

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pgQueryString(t *testing.T, conn *pgx.Conn, q string, args ...any) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func local() bool { return os.Getenv(EnvPostgresURL) == "" }

// TestPostgres holds one database for its whole run so that its subtests
// share one cluster even without Main.
func TestPostgres(t *testing.T) {
	Postgres(t)
	t.Run("FreshDatabases", testPostgresFreshDatabases)
	t.Run("ThrowawayCluster", testPostgresThrowawayCluster)
	t.Run("DropsDatabaseAtCleanup", testPostgresDropsDatabaseAtCleanup)
}

func testPostgresFreshDatabases(t *testing.T) {
	dsn1, dsn2 := Postgres(t), Postgres(t)
	if dsn1 == dsn2 {
		t.Fatalf("two calls returned the same dsn %s", dsn1)
	}
	c1, c2 := pgConnect(t, dsn1), pgConnect(t, dsn2)
	for _, c := range []*pgx.Conn{c1, c2} {
		if n := pgQueryString(t, c, `SELECT count(*)::text FROM pg_tables WHERE schemaname = 'public'`); n != "0" {
			t.Fatalf("fresh database has %s tables", n)
		}
	}
	if _, err := c1.Exec(context.Background(), `CREATE TABLE only_here (x int)`); err != nil {
		t.Fatal(err)
	}
	if n := pgQueryString(t, c2, `SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_here'`); n != "0" {
		t.Fatalf("table of one database visible in another")
	}
	if pgQueryString(t, c1, `SELECT current_database()`) == pgQueryString(t, c2, `SELECT current_database()`) {
		t.Fatalf("both dsns reach one database")
	}
}

func testPostgresThrowawayCluster(t *testing.T) {
	if !local() {
		t.Skip(EnvPostgresURL + " is set: no throwaway cluster")
	}
	conn := pgConnect(t, Postgres(t))
	for setting, want := range map[string]string{
		"fsync":              "off",
		"listen_addresses":   "127.0.0.1",
		"server_encoding":    "UTF8",
		"synchronous_commit": "off",
	} {
		if got := pgQueryString(t, conn, `SELECT current_setting($1)`, setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	dir := pgQueryString(t, conn, `SELECT current_setting('unix_socket_directories')`)
	if !strings.HasPrefix(filepath.Base(dir), "edgeagent-pg-") {
		t.Errorf("unix_socket_directories = %q, want the cluster's temp dir", dir)
	}
}

func testPostgresDropsDatabaseAtCleanup(t *testing.T) {
	// This test's own database keeps the cluster up and gives a connection.
	conn := pgConnect(t, Postgres(t))
	var name string
	t.Run("use", func(t *testing.T) {
		c := pgConnect(t, Postgres(t))
		name = pgQueryString(t, c, `SELECT current_database()`)
		if _, err := c.Exec(context.Background(), `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
	})
	if n := pgQueryString(t, conn, `SELECT count(*)::text FROM pg_database WHERE datname = $1`, name); n != "0" {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestPostgresStoppedWhenUnused(t *testing.T) {
	if !local() {
		t.Skip(EnvPostgresURL + " is set: no throwaway cluster")
	}
	pgShared.Lock()
	keep := pgShared.keep
	pgShared.Unlock()
	if keep {
		t.Skip("Main keeps the cluster until the binary ends")
	}
	var dir string
	t.Run("use", func(t *testing.T) {
		Postgres(t)
		pgShared.Lock()
		dir = pgShared.c.Dir()
		pgShared.Unlock()
	})
	pgShared.Lock()
	running := pgShared.c != nil
	pgShared.Unlock()
	if running {
		t.Fatalf("cluster still running with no test holding it")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster dir %s not removed: %v", dir, err)
	}
}

func TestPostgresKeptUntilStop(t *testing.T) {
	if !local() {
		t.Skip(EnvPostgresURL + " is set: no throwaway cluster")
	}
	// What Main does around m.Run.
	pgShared.Lock()
	keep := pgShared.keep
	pgShared.keep = true
	pgShared.Unlock()
	defer func() {
		pgShared.Lock()
		pgShared.keep = keep
		pgShared.Unlock()
	}()

	var first, second *pgcluster.Cluster
	t.Run("first", func(t *testing.T) {
		Postgres(t)
		first = pgShared.c
	})
	t.Run("second", func(t *testing.T) {
		pgConnect(t, Postgres(t))
		second = pgShared.c
	})
	if first == nil || first != second {
		t.Fatalf("sequential tests got different clusters")
	}
	if keep {
		return // Main stops it
	}
	StopPostgres()
	if pgShared.c != nil {
		t.Fatalf("StopPostgres left the cluster")
	}
	select {
	case <-first.Exited():
	default:
		t.Fatalf("server process still running after StopPostgres")
	}
	if _, err := os.Stat(first.Dir()); !os.IsNotExist(err) {
		t.Fatalf("cluster dir %s not removed: %v", first.Dir(), err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/db1?sslmode=disable"},
		{"postgresql://u@h/", "postgresql://u@h/db1"},
		{"postgres://u@h", "postgres://u@h/db1"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=db1"},
	} {
		got, err := pgcluster.WithDatabase(tc.in, "db1")
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got != tc.want {
			t.Errorf("pgcluster.WithDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Fatalf("parse %s: %v", got, err)
		}
		if cfg.Database != "db1" {
			t.Errorf("%s: database %q, want db1", got, cfg.Database)
		}
	}
}
