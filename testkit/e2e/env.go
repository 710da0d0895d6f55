package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// Env is the real servers the binaries of a test run on: an embedded NATS
// server, started by NewEnv, and a PostgreSQL database and a MinIO bucket,
// made on first use. Every coordinator and agent of the Env shares them.
type Env struct {
	t    *testing.T
	nats *server.Server

	mu    sync.Mutex
	dsn   string
	minio *testenv.MinIOServer
	files int
}

// NewEnv starts an embedded NATS server for the test; the servers of the
// Env are stopped when the test ends.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	return &Env{t: t, nats: testenv.NATS(t)}
}

// NewEnvWithNATS is NewEnv on a NATS server the test started, such as
// one in operator mode from the include `edgecoord nats init` wrote
// (testenv.NATSOperator).
func NewEnvWithNATS(t *testing.T, ns *server.Server) *Env {
	t.Helper()
	return &Env{t: t, nats: ns}
}

// NATS is the embedded NATS server.
func (e *Env) NATS() *server.Server { return e.nats }

// NATSURL is the NATS server's client URL.
func (e *Env) NATSURL() string { return e.nats.ClientURL() }

// Postgres returns the DSN of the Env's PostgreSQL database, a fresh one
// made on the first call (testenv.Postgres).
func (e *Env) Postgres() string {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dsn == "" {
		e.dsn = testenv.Postgres(e.t)
	}
	return e.dsn
}

// MinIO returns the Env's MinIO server with its bucket, made on the first
// call (testenv.MinIO).
func (e *Env) MinIO() testenv.MinIOServer {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.minio == nil {
		m := testenv.MinIO(e.t)
		e.minio = &m
	}
	return *e.minio
}

// writeConfig writes base with extra (YAML) merged into it to a new file
// named after name and returns its path.
func (e *Env) writeConfig(name string, base map[string]any, extra string) string {
	e.t.Helper()
	if extra != "" {
		var add map[string]any
		if err := yaml.Unmarshal([]byte(extra), &add); err != nil {
			e.t.Fatalf("extra YAML for %s: %v\n%s", name, err, extra)
		}
		merge(base, add)
	}
	data, err := yaml.Marshal(base)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.files++
	path := filepath.Join(e.t.TempDir(), fmt.Sprintf("%s-%d.yaml", name, e.files))
	e.mu.Unlock()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// merge sets every key of add in dst: mappings present in both are merged
// key by key, anything else in add replaces what dst has (a null removes
// the key).
func merge(dst, add map[string]any) {
	for k, v := range add {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			if have, ok := dst[k].(map[string]any); ok {
				merge(have, sub)
				continue
			}
		}
		dst[k] = v
	}
}
