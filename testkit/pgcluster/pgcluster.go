// Package pgcluster starts throwaway PostgreSQL clusters for the tests and
// the benchmarks: initdb in a temp directory, the server on a random
// loopback port with fsync off and its socket in that directory; as root it
// runs as the postgres user through runuser, on a directory that user owns.
// The server is told to shut down when the process that started it dies
// (parent death signal, Linux), and directories left by killed processes
// are removed by the next start.
package pgcluster

import (
	"context"
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
	"time"

	"github.com/jackc/pgx/v5"
)

// dirPrefix names the temp directories of started clusters; the pid of the
// process follows, so directories of finished runs can be removed.
const dirPrefix = "edgeagent-pg-"

// ErrNotFound is wrapped by Start's error when PostgreSQL cannot run here:
// no server binaries, or no postgres user to run them as when root.
var ErrNotFound = errors.New("PostgreSQL cannot run here")

// Options tune a cluster.
type Options struct {
	// MaxConnections is the server's max_connections; default 200.
	MaxConnections int
	// StatStatements loads pg_stat_statements (tracking every statement)
	// when the library is installed next to the server binaries; see
	// Cluster.Statements.
	StatStatements bool
}

// Cluster is a running throwaway cluster.
type Cluster struct {
	bin     string // directory of initdb, pg_ctl and postgres
	runuser string // path of runuser when running as root, else ""
	dir     string // temp directory: data/, the socket and postgres.log
	port    int
	opts    Options
	stats   bool          // pg_stat_statements is loaded
	exited  chan struct{} // closed when the server process has exited
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// DSN returns the URL of database db (over TCP, as postgres).
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// command runs a PostgreSQL binary, as the postgres user when root.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
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

// Dir is the cluster's temp directory: data/, the socket and postgres.log.
func (c *Cluster) Dir() string { return c.dir }

// PID is the postmaster's pid (its backends are its children), 0 when it
// cannot be read.
func (c *Cluster) PID() int { return postmasterPID(c.data()) }

// Exited is closed when the server process has exited.
func (c *Cluster) Exited() <-chan struct{} { return c.exited }

// Statements reports whether pg_stat_statements is loaded.
func (c *Cluster) Statements() bool { return c.stats }

// Start finds the binaries (initdb on PATH, else the highest version under
// /usr/lib/postgresql/*/bin) and starts a cluster. When PostgreSQL cannot
// run here the error wraps ErrNotFound.
func Start(opts Options) (c *Cluster, err error) {
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = 200
	}
	bin, err := findBin()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	c = &Cluster{bin: bin, opts: opts}
	var owner *user.User
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if owner, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("%w: running as root needs a postgres user to run PostgreSQL as: %v", ErrNotFound, err)
		}
		if c.runuser, err = exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("%w: running as root needs runuser to run PostgreSQL as postgres: %v", ErrNotFound, err)
		}
	}
	base := tempBase()
	removeStale(base)
	if c.dir, err = os.MkdirTemp(base, dirPrefix+strconv.Itoa(os.Getpid())+"-"); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	if owner != nil {
		if err := chown(c.dir, owner); err != nil {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
	initdb := c.command("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// A port picked free may be taken before the server binds it; try again.
	for attempt := 1; ; attempt++ {
		err = c.run()
		if err == nil {
			return c, nil
		}
		if attempt == 3 {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
}

// run starts the server in the foreground of a goroutine and waits until it
// accepts connections.
func (c *Cluster) run() error {
	var err error
	if c.port, err = freePort(); err != nil {
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
		"-c", "max_connections="+strconv.Itoa(c.opts.MaxConnections))
	c.stats = c.opts.StatStatements && hasStatStatements(c.bin)
	if c.stats {
		cmd.Args = append(cmd.Args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all")
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	setDeathSignal(cmd)

	c.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The server is told to shut down when the thread that started it
		// ends (see setDeathSignal), so that thread stays with this
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
			return fmt.Errorf("postgres exited before accepting connections: %s", logTail(logPath))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-c.exited
			return fmt.Errorf("postgres not accepting connections after 30s: %v: %s", err, logTail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down (fast mode: clients are disconnected) and
// removes the cluster directory.
func (c *Cluster) Stop() error {
	var errs []error
	out, err := c.command("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w", "-t", "30").CombinedOutput()
	if err != nil {
		errs = append(errs, fmt.Errorf("pg_ctl stop: %w: %s", err, strings.TrimSpace(string(out))))
		killPostmaster(c.data())
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

// versionsGlob matches the bin directories of Debian's PostgreSQL packages.
var versionsGlob = "/usr/lib/postgresql/*/bin"

// findBin returns the directory holding initdb, pg_ctl and postgres: the
// one of initdb on PATH (after symlinks), else the highest version under
// /usr/lib/postgresql/*/bin.
func findBin() (string, error) {
	complete := func(dir string) bool {
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || !fi.Mode().IsRegular() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// A symlink on PATH (Debian's wrappers, a link into
		// /usr/local/bin) points at the installation, whose lib/ holds
		// the extensions.
		if real, err := filepath.EvalSymlinks(p); err == nil && complete(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if d := filepath.Dir(p); complete(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob(versionsGlob)
	sort.Slice(dirs, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(dirs[j])), filepath.Base(filepath.Dir(dirs[i])))
	})
	for _, d := range dirs {
		if complete(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not on PATH nor under /usr/lib/postgresql/*/bin")
}

// versionLess compares versions like "9.6" and "15" numerically.
func versionLess(a, b string) bool {
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

// tempBase is the directory cluster directories are made in. As root the
// postgres user must be able to reach it, so a private TMPDIR falls back to
// /tmp.
func tempBase() string {
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

// removeStale removes the cluster directories of processes that have
// exited, once their server is gone.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), dirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if pm := postmasterPID(filepath.Join(d, "data")); pm > 0 && processAlive(pm) {
			continue
		}
		os.RemoveAll(d)
	}
}

// postmasterPID reads the server pid from postmaster.pid, or 0.
func postmasterPID(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the end of the server log.
func logTail(path string) string {
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

// hasStatStatements reports whether the pg_stat_statements library sits
// next to the server binaries (bin/../lib).
func hasStatStatements(bin string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(bin), "lib", "pg_stat_statements.so"))
	return err == nil
}

// WithDatabase returns dsn (URL or key=value form) with its database
// replaced by name.
func WithDatabase(dsn, name string) (string, error) {
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
