package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/testkit/pgcluster"
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
	cluster    *pgcluster.Cluster
}

// OpenPostgres uses the server at url (its role must be allowed to create
// databases) or, when url is empty, starts a throwaway cluster with
// initdb from PATH or /usr/lib/postgresql/*/bin, on a random loopback
// port, fsync off (as the tests run it); as root the cluster runs as the
// postgres user through runuser.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	p := &Postgres{admin: url}
	if url == "" {
		c, err := pgcluster.Start(pgcluster.Options{MaxConnections: 300, StatStatements: true})
		if errors.Is(err, pgcluster.ErrNotFound) {
			return nil, fmt.Errorf("start postgres: %w (give -postgres-url)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		p.cluster = c
		p.admin = c.DSN("postgres")
		p.PID = c.PID()
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
	dsn, err := pgcluster.WithDatabase(p.admin, name)
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
	err := p.cluster.Stop()
	p.cluster = nil
	return err
}
