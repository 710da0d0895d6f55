package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresURL points the tests at an existing PostgreSQL server instead of
// a throwaway cluster. The role in it must be allowed to create databases.
const EnvPostgresURL = "EDGE_TEST_POSTGRES_URL"

// pgDirPrefix names the temp directories of started clusters; the pid of the
// test binary follows, so directories of finished runs can be removed.
const pgDirPrefix = "edgeagent-pg-"

// pgShared is the test binary's throwaway cluster.
var pgShared struct {
	sync.Mutex
	keep    bool       // set by Main: the cluster lives until StopPostgres
	refs    int        // Postgres calls whose test has not ended
	c       *pgCluster // nil when not running
	missing string     // why PostgreSQL cannot run here
	err     error      // start failure, kept so later tests fail fast
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
		dsn, err := pgWithDatabase(base, name)
		if err != nil {
			t.Fatalf("%s: %v", EnvPostgresURL, err)
		}
		pgCreateDatabase(t, base, name)
		return dsn
	}
	c := pgAcquire(t)
	name := fmt.Sprintf("test_%d", pgDatabases.Add(1))
	pgCreateDatabase(t, c.dsn("postgres"), name)
	return c.dsn(name)
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
		if err := pgShared.c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop postgres: %v\n", err)
		}
		pgShared.c = nil
	}
}

// pgAcquire returns the running cluster, starting it if needed, and holds a
// reference to it until the test ends.
func pgAcquire(t testing.TB) *pgCluster {
	t.Helper()
	pgShared.Lock()
	defer pgShared.Unlock()
	if pgShared.c == nil && pgShared.missing == "" && pgShared.err == nil {
		pgShared.c, pgShared.missing, pgShared.err = pgStart()
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
		if err := pgShared.c.stop(); err != nil {
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

// pgWithDatabase returns dsn (URL or key=value form) with its database
// replaced by name.
func pgWithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse postgres url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") {
			q.Set("dbname", name)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", fmt.Errorf("parse postgres dsn: %w", err)
	}
	// In the key=value form the last setting of a key wins.
	return strings.TrimSpace(dsn) + " dbname=" + name, nil
}

// pgCluster is a running throwaway cluster.
type pgCluster struct {
	bin     string // directory of initdb, pg_ctl and postgres
	runuser string // path of runuser when running as root, else ""
	dir     string // temp directory: data/, the socket and postgres.log
	port    int
	exited  chan struct{} // closed when the server process has exited
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// command runs a PostgreSQL binary, as the postgres user when root.
func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runuser != "" {
		cmd = exec.Command(c.runuser, append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd
}

// pgStart finds the binaries and starts a cluster, or says why it cannot.
func pgStart() (c *pgCluster, missing string, err error) {
	bin, err := pgFindBin()
	if err != nil {
		return nil, err.Error(), nil
	}
	c = &pgCluster{bin: bin}
	var owner *user.User
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if owner, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Sprintf("running as root needs a postgres user to run PostgreSQL as: %v", err), nil
		}
		if c.runuser, err = exec.LookPath("runuser"); err != nil {
			return nil, fmt.Sprintf("running as root needs runuser to run PostgreSQL as postgres: %v", err), nil
		}
	}
	base := pgTempBase()
	pgRemoveStale(base)
	if c.dir, err = os.MkdirTemp(base, pgDirPrefix+strconv.Itoa(os.Getpid())+"-"); err != nil {
		return nil, "", fmt.Errorf("create cluster dir: %w", err)
	}
	if owner != nil {
		if err := pgChown(c.dir, owner); err != nil {
			os.RemoveAll(c.dir)
			return nil, "", err
		}
	}
	initdb := c.command("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(c.dir)
		return nil, "", fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// A port picked free may be taken before the server binds it; try again.
	for attempt := 1; ; attempt++ {
		err = c.run()
		if err == nil {
			return c, "", nil
		}
		if attempt == 3 {
			os.RemoveAll(c.dir)
			return nil, "", err
		}
	}
}

// run starts the server in the foreground of a goroutine and waits until it
// accepts connections.
func (c *pgCluster) run() error {
	var err error
	if c.port, err = pgFreePort(); err != nil {
		return err
	}
	logPath := filepath.Join(c.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create postgres log: %w", err)
	}
	defer logf.Close()
	cmd := c.command("postgres", "-D", c.data(), "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+c.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.Stdout = logf
	cmd.Stderr = logf
	pgSetDeathSignal(cmd)

	c.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The server is told to shut down when the thread that started it
		// ends (see pgSetDeathSignal), so that thread stays with this
		// goroutine until the server is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(c.exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("run postgres: %w", err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited before accepting connections: %s", pgLogTail(logPath))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-c.exited
			return fmt.Errorf("postgres not accepting connections after 30s: %v: %s", err, pgLogTail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the server down (fast mode: clients are disconnected) and
// removes the cluster directory.
func (c *pgCluster) stop() error {
	var errs []error
	out, err := c.command("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w", "-t", "30").CombinedOutput()
	if err != nil {
		errs = append(errs, fmt.Errorf("pg_ctl stop: %w: %s", err, strings.TrimSpace(string(out))))
		pgKillPostmaster(c.data())
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		errs = append(errs, fmt.Errorf("postgres still running 30s after stop"))
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster dir: %w", err))
	}
	return errors.Join(errs...)
}

// pgVersionsGlob matches the bin directories of Debian's PostgreSQL packages.
var pgVersionsGlob = "/usr/lib/postgresql/*/bin"

// pgFindBin returns the directory holding initdb, pg_ctl and postgres: the
// one of initdb on PATH, else the highest version under
// /usr/lib/postgresql/*/bin.
func pgFindBin() (string, error) {
	complete := func(dir string) bool {
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || !fi.Mode().IsRegular() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); complete(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob(pgVersionsGlob)
	sort.Slice(dirs, func(i, j int) bool {
		return pgVersionLess(filepath.Base(filepath.Dir(dirs[j])), filepath.Base(filepath.Dir(dirs[i])))
	})
	for _, d := range dirs {
		if complete(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not on PATH nor under /usr/lib/postgresql/*/bin")
}

// pgVersionLess compares versions like "9.6" and "15" numerically.
func pgVersionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// pgTempBase is the directory cluster directories are made in. As root the
// postgres user must be able to reach it, so a private TMPDIR falls back to
// /tmp.
func pgTempBase() string {
	base := os.TempDir()
	if os.Geteuid() != 0 {
		return base
	}
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

// pgRemoveStale removes the cluster directories of test binaries that have
// exited, once their server is gone.
func pgRemoveStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, pgDirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), pgDirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || pgProcessAlive(pid) {
			continue
		}
		if pm := pgPostmasterPID(filepath.Join(d, "data")); pm > 0 && pgProcessAlive(pm) {
			continue
		}
		os.RemoveAll(d)
	}
}

// pgPostmasterPID reads the server pid from postmaster.pid, or 0.
func pgPostmasterPID(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

func pgFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pgLogTail returns the end of the server log.
func pgLogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 4096 {
		s = s[len(s)-4096:]
	}
	if s == "" {
		return "(empty log)"
	}
	return s
}

func pgRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
