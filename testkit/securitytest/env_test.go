package securitytest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestMain stops the throwaway PostgreSQL cluster once the tests have run.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

// natsFromExample starts an embedded NATS server with the users and
// permissions of examples/nats-server.conf, the passwords taken from the
// environment as the file says.
func natsFromExample(t *testing.T, coordPassword, kitchenPassword, garagePassword string) *server.Server {
	t.Helper()
	t.Setenv("EDGE_NATS_PASSWORD", coordPassword)
	t.Setenv("EDGE_NATS_PC_KITCHEN_PASSWORD", kitchenPassword)
	t.Setenv("EDGE_NATS_PC_GARAGE_PASSWORD", garagePassword)
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "examples", "nats-server.conf"))
	if err != nil {
		t.Fatalf("examples/nats-server.conf: %v", err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	return startNATS(t, opts)
}

func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // the umask may have narrowed it
		t.Fatal(err)
	}
	return path
}

// ── The binaries ────────────────────────────────────────────────────────

// binaries returns the paths of edgeagent and edgecoord, built once per
// test run.
func binaries(t *testing.T) (edgeagent, edgecoord string) {
	t.Helper()
	return testenv.Binary(t, "edgeagent"), testenv.Binary(t, "edgecoord")
}

// output collects everything the processes and commands of a test print.
type output struct {
	mu  sync.Mutex
	all []capture
}

// capture is one output: what printed it, and its text so far.
type capture struct {
	what string
	text func() string
}

func (o *output) add(what string, text func() string) {
	o.mu.Lock()
	o.all = append(o.all, capture{what, text})
	o.mu.Unlock()
}

// addText records text produced elsewhere (an HTTP body).
func (o *output) addText(what, text string) {
	o.add(what, func() string { return text })
}

// run runs a command to its end with env added to the environment and
// records its standard output and error; it returns both and the exit
// status.
func (o *output) run(t *testing.T, env []string, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := e2e.Command{Path: name, Args: args, Env: append([]string{}, env...)}
	stdout, stderr, code = e2e.Run(t, c)
	what := filepath.Base(name) + " " + strings.Join(args, " ")
	o.addText(what+" (stdout)", stdout)
	o.addText(what+" (stderr)", stderr)
	return stdout, stderr, code
}

// start starts a long-running command with env added to the environment
// and records its output (e2e.Start: killed at the end of the test if it
// still runs).
func (o *output) start(t *testing.T, env []string, name string, args ...string) *e2e.Process {
	t.Helper()
	return o.startEnv(t, append(os.Environ(), env...), name, args...)
}

// startEnv is start with exactly the environment env.
func (o *output) startEnv(t *testing.T, env []string, name string, args ...string) *e2e.Process {
	t.Helper()
	p := e2e.Start(t, e2e.Command{Path: name, Args: args, ExactEnv: env})
	o.add(p.Name(), p.Log)
	return p
}

// ── Finding secrets ─────────────────────────────────────────────────────

// encodedForms returns s and the forms it takes when encoded on its way to
// a log: URL query and path escaping, JSON string escaping (with and
// without escaped slashes), hex, and base64 (standard and URL alphabets,
// padded or not) at each of the three byte alignments it can have inside a
// longer encoded value such as "user:password".
func encodedForms(s string) []string {
	forms := []string{s, url.QueryEscape(s), url.PathEscape(s), hex.EncodeToString([]byte(s))}
	if j, err := json.Marshal(s); err == nil {
		inner := strings.Trim(string(j), `"`)
		forms = append(forms, inner, strings.ReplaceAll(inner, "/", `\/`))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for shift := range 3 {
			e := enc.EncodeToString(append(make([]byte, shift), s...))
			// The first characters mix in the padding bytes, the last
			// ones the end of the value: keep those s alone decides.
			skip := (shift*8 + 5) / 6
			e = strings.TrimRight(e, "=")
			if len(e)-skip-1 < 8 {
				continue
			}
			forms = append(forms, e[skip:len(e)-1])
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range forms {
		if len(f) >= 8 && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// findSecrets reports every recorded output that contains a secret in any
// of its encoded forms, with the text around it, and adds the bytes read to
// *n.
func (o *output) findSecrets(secrets map[string]string, n *int) []string {
	o.mu.Lock()
	all := append([]capture(nil), o.all...)
	o.mu.Unlock()
	var found []string
	for _, c := range all {
		text := c.text()
		*n += len(text)
		for name, secret := range secrets {
			for _, form := range encodedForms(secret) {
				if i := strings.Index(text, form); i >= 0 {
					lo, hi := max(0, i-200), min(len(text), i+len(form)+200)
					found = append(found, fmt.Sprintf("%s shows the %s (as %q):\n…%s…", c.what, name, form, text[lo:hi]))
				}
			}
		}
	}
	return found
}

// matches reports whether any recorded output matches re.
func (o *output) matches(re *regexp.Regexp) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.all {
		if re.MatchString(c.text()) {
			return true
		}
	}
	return false
}

// ── A coordinator in the test process ───────────────────────────────────

// openSQLite opens a fresh SQLite job store.
func openSQLite(t *testing.T) jobstore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatalf("open sqlite store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPostgres opens a store on a fresh PostgreSQL database.
func openPostgres(t *testing.T) jobstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runCoordinator runs a coordinator on store, connected to url with nopts,
// until the end of the test, and waits until it serves every verb.
func runCoordinator(t *testing.T, url string, store jobstore.Store, opts coordinator.Options, nopts ...nats.Option) *coordinator.Server {
	t.Helper()
	nopts = append([]nats.Option{nats.Name("coordinator"), nats.CustomInboxPrefix(coordinator.InboxPrefix)}, nopts...)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		t.Fatalf("connect coordinator: %v", err)
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.ScheduleInterval == 0 {
		opts.ScheduleInterval = 50 * time.Millisecond
	}
	if opts.HeartbeatEvery == 0 {
		opts.HeartbeatEvery = 200 * time.Millisecond
	}
	if opts.ReapInterval == 0 {
		opts.ReapInterval = 200 * time.Millisecond
	}
	srv := coordinator.New(nc, store, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		nc.Close()
	})
	// Serving once its micro service lists every endpoint.
	testenv.Eventually(t, 10*time.Second, "the coordinator to serve", func() bool {
		msg, err := nc.Request("$SRV.INFO."+coordinator.ServiceName, nil, 200*time.Millisecond)
		if err != nil {
			return false
		}
		var info struct {
			Endpoints []json.RawMessage `json:"endpoints"`
		}
		return json.Unmarshal(msg.Data, &info) == nil && len(info.Endpoints) == len(protocol.CoordVerbs)
	})
	return srv
}
