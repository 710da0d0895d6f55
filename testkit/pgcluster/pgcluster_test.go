package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStart starts a cluster with non-default options and checks its
// settings, its owner when root, and that Stop removes it.
func TestStart(t *testing.T) {
	c, err := Start(Options{MaxConnections: 123, StatStatements: true})
	if errors.Is(err, ErrNotFound) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	setting := func(name string) string {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	if got := setting("max_connections"); got != "123" {
		t.Errorf("max_connections = %s, want 123", got)
	}
	if got := setting("fsync"); got != "off" {
		t.Errorf("fsync = %s", got)
	}
	if libs := setting("shared_preload_libraries"); c.Statements() != strings.Contains(libs, "pg_stat_statements") {
		t.Errorf("Statements() = %v, shared_preload_libraries = %q", c.Statements(), libs)
	}
	if c.PID() <= 0 {
		t.Errorf("PID() = %d", c.PID())
	}
	dir := c.Dir()
	if os.Geteuid() == 0 {
		// The server refuses root, so it must run as postgres, which owns
		// the data directory.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, err := fileUID(filepath.Join(dir, "data"))
		if err != nil {
			t.Fatal(err)
		}
		if strconv.Itoa(uid) != u.Uid {
			t.Errorf("data dir owned by uid %d, want postgres (%s)", uid, u.Uid)
		}
		var who string
		if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&who); err != nil || who != "postgres" {
			t.Errorf("current_user = %q, %v", who, err)
		}
	}
	conn.Close(ctx)
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster dir after Stop: %v", err)
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"9.6", "15", true},
		{"15", "9.6", false},
		{"13", "15", true},
		{"15", "15", false},
		{"16", "17", true},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestMissingBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := versionsGlob
	versionsGlob = filepath.Join(t.TempDir(), "*", "bin")
	defer func() { versionsGlob = old }()
	c, err := Start(Options{})
	if c != nil || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "initdb") {
		t.Fatalf("Start without binaries: %v, %v", c, err)
	}
}

func TestFindBinPrefersHighestVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "15"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			if v == "15" && n == "pg_ctl" {
				continue // incomplete: skipped
			}
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("PATH", t.TempDir())
	old := versionsGlob
	versionsGlob = filepath.Join(root, "*", "bin")
	defer func() { versionsGlob = old }()
	got, err := findBin()
	if err != nil || got != filepath.Join(root, "13", "bin") {
		t.Fatalf("findBin = %q, %v; want the 13 directory", got, err)
	}
}
