package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL server the benchmarks create databases on: an
// existing one (a URL) or a throwaway cluster started in a temp directory.
type Postgres struct {
	admin string // DSN of a database to run CREATE DATABASE from
	// PID is the postmaster's pid for a throwaway cluster (its CPU and
	// that of its backends are sampled), 0 for an existing server.
	PID        int
	Statements bool // pg_stat_statements is loaded
	Version    string
	cluster    *pgCluster
}

// OpenPostgres uses the server at url (its role must be allowed to create
// databases) or, when url is empty, starts a throwaway cluster with
// initdb from PATH or /usr/lib/postgresql/*/bin, on a random loopback
// port, fsync off (as the tests run it); as root the cluster runs as the
// postgres user through runuser.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	p := &Postgres{admin: url}
	if url == "" {
		c, err := startCluster()
		if err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		p.cluster = c
		p.admin = c.dsn("postgres")
		p.PID = c.pid
	}
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	_ = conn.QueryRow(ctx, `SHOW server_version`).Scan(&p.Version)
	var libs string
	_ = conn.QueryRow(ctx, `SHOW shared_preload_libraries`).Scan(&libs)
	p.Statements = strings.Contains(libs, "pg_stat_statements")
	return p, nil
}

// CreateDatabase creates a fresh database and returns its DSN and a
// function that drops it.
func (p *Postgres) CreateDatabase(ctx context.Context) (string, func(), error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("edgebench_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := withDatabase(p.admin, name)
	if err != nil {
		return "", nil, err
	}
	if p.Statements {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
			c.Close(ctx)
		}
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, p.admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			c.Close(ctx)
		}
	}
	return dsn, drop, nil
}

// Sample reads the CPU time and RSS of the throwaway cluster (postmaster
// and backends); not OK for an existing server.
func (p *Postgres) Sample() ProcSample {
	if p.PID == 0 {
		return ProcSample{At: time.Now(), Desc: "external server"}
	}
	return SampleTree(p.PID)
}

// Close stops a throwaway cluster and removes its directory.
func (p *Postgres) Close() error {
	if p.cluster == nil {
		return nil
	}
	err := p.cluster.stop()
	p.cluster = nil
	return err
}

func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse postgres url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " dbname=" + name, nil
}

// pgCluster is a throwaway cluster.
type pgCluster struct {
	bin     string
	runuser string
	dir     string
	port    int
	pid     int
	cmd     *exec.Cmd
	exited  chan struct{}
}

func (c *pgCluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

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

func startCluster() (*pgCluster, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin}
	base := os.TempDir()
	if os.Geteuid() == 0 {
		if c.runuser, err = exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("running as root needs runuser to run PostgreSQL as postgres: %w", err)
		}
		base = "/tmp"
	}
	if c.dir, err = os.MkdirTemp(base, "edgebench-pg-"); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	if c.runuser != "" {
		if err := chownPostgres(c.dir); err != nil {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
	data := filepath.Join(c.dir, "data")
	if out, err := c.command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if c.port, err = freePort(); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + c.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300"}
	if hasStatStatements(bin) {
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all")
	}
	logf, err := os.Create(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("create postgres log: %w", err)
	}
	defer logf.Close()
	c.cmd = c.command("postgres", args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	setDeathSignal(c.cmd)
	c.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The server gets SIGTERM when the thread that started it ends, so
		// that thread stays with this goroutine until the server is gone.
		runtime.LockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			close(c.exited)
			return
		}
		started <- nil
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("run postgres: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		if err == nil {
			conn.Close(ctx)
			cancel()
			break
		}
		cancel()
		select {
		case <-c.exited:
			b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("postgres exited: %s", strings.TrimSpace(string(b)))
		default:
		}
		if time.Now().After(deadline) {
			_ = c.stop()
			return nil, fmt.Errorf("postgres not accepting connections after 30s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		c.pid, _ = strconv.Atoi(strings.TrimSpace(line))
	}
	return c, nil
}

func (c *pgCluster) stop() error {
	var err error
	if out, e := c.command("pg_ctl", "stop", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "-t", "30").CombinedOutput(); e != nil {
		err = fmt.Errorf("pg_ctl stop: %w: %s", e, strings.TrimSpace(string(out)))
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
		}
	}
	if c.exited != nil {
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
		}
	}
	os.RemoveAll(c.dir)
	return err
}

func pgBin() (string, error) {
	complete := func(dir string) bool {
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && complete(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if complete(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if complete(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH nor under /usr/lib/postgresql/*/bin; give -postgres-url")
}

// hasStatStatements reports whether the pg_stat_statements library sits
// next to the server binaries (bin/../lib).
func hasStatStatements(bin string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(bin), "lib", "pg_stat_statements.so"))
	return err == nil
}
