package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// StorageMode is how an agent reaches artifact storage.
type StorageMode int

const (
	// StorageCredentials: the agent holds the Env's MinIO credentials
	// and uploads with them.
	StorageCredentials StorageMode = iota
	// StoragePresigned: the agent holds no storage credentials; the
	// coordinator presigns each upload (storage.mode presigned).
	StoragePresigned
)

// Phone is one entry of the agent's devices.
type Phone struct {
	Serial string
	// Simulated is a phone the agent simulates (no adb).
	Simulated bool
	Tags      []string
	// WDAURL makes the phone an iPhone (platform: ios) with UDID Serial,
	// driven through the WebDriverAgent at this URL (a fakewda.Phone's).
	WDAURL string
}

// AgentOptions are what a test chooses of an edgeagent config; the rest is
// fixed for fast tests (debug log, NATS reconnect every 100ms, lease safety
// margin 300ms, status server on a free address).
type AgentOptions struct {
	// ID is agent_id; default "pc-bin".
	ID string
	// StateDir is state_dir (with the spool and the capture directory,
	// spool/capture); default a fresh directory.
	StateDir string
	// ShutdownTimeout is jobs.shutdown_timeout; default 5s.
	ShutdownTimeout time.Duration
	// Storage is how it uploads; default StorageCredentials.
	Storage StorageMode
	// ADB is the adb server (with fake phones, testkit/fakeadbd) the agent
	// uses; nil: none configured.
	ADB *testenv.ADBServer
	// Phones are its devices; default one simulated phone sim-1 tagged lab.
	Phones []Phone
	// OpTimeout is phones.op_timeout, the bound of a tap, swipe, text,
	// key, launch and an iPhone's reconnect: a test whose phone hangs
	// sets it short. 0: not written, the agent's default (20s).
	OpTimeout time.Duration
	// Env is the whole environment of the agent's processes (an adb
	// with its own HOME); nil: the test's.
	Env []string
	// Extra is YAML merged into the config (CoordinatorOptions.Extra).
	Extra string
	// Enrolled is a config `edgeagent enroll` wrote: its agent_id, nats
	// and storage are kept (ID and Storage are ignored), the rest is set
	// from these options.
	Enrolled string
}

// Agent is an edgeagent config on the Env's servers and its latest `edgeagent
// run` process.
type Agent struct {
	env  *Env
	opts AgentOptions
	// Config is the path of the config file.
	Config string
	// StateDir is its state directory.
	StateDir string
	// StatusAddr is host:port of its status server (/metrics, /readyz,
	// edgeagent status).
	StatusAddr string
	// Process is the latest process started (nil before Start).
	*Process
}

// StartAgent writes a config from opts and starts `edgeagent run` with it.
// It does not wait for the agent to connect: a test waits for what it
// needs (the agent online at the coordinator, a log line).
func (e *Env) StartAgent(opts AgentOptions) *Agent {
	e.t.Helper()
	a := e.NewAgent(opts)
	a.Start()
	return a
}

// NewAgent writes a config from opts without starting the agent.
func (e *Env) NewAgent(opts AgentOptions) *Agent {
	e.t.Helper()
	if opts.ID == "" {
		opts.ID = "pc-bin"
	}
	if opts.StateDir == "" {
		opts.StateDir = e.t.TempDir()
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.Phones == nil {
		opts.Phones = []Phone{{Serial: "sim-1", Simulated: true, Tags: []string{"lab"}}}
	}
	a := &Agent{env: e, opts: opts, StateDir: opts.StateDir, StatusAddr: testenv.FreeAddr(e.t)}
	// request_timeout 2s: a coordinator on a machine the rest of the suite
	// keeps busy can answer a request a second late; at 1s an artifact
	// registration timed out and failed its job.
	cfg := map[string]any{
		"agent_id":  opts.ID,
		"state_dir": opts.StateDir,
		"log":       map[string]any{"level": "debug"},
		"nats":      map[string]any{"url": e.NATSURL(), "reconnect_wait": "100ms", "request_timeout": "2s"},
		"lease":     map[string]any{"safety_margin": "300ms"},
		"jobs":      map[string]any{"shutdown_timeout": opts.ShutdownTimeout.String()},
		"status":    map[string]any{"listen": a.StatusAddr},
	}
	if opts.Enrolled != "" {
		data, err := os.ReadFile(opts.Enrolled)
		if err != nil {
			e.t.Fatal(err)
		}
		var enrolled map[string]any
		if err := yaml.Unmarshal(data, &enrolled); err != nil {
			e.t.Fatalf("%s: %v", opts.Enrolled, err)
		}
		id, _ := enrolled["agent_id"].(string)
		opts.ID, a.opts.ID = id, id
		cfg["agent_id"], cfg["storage"] = id, enrolled["storage"]
		merge(cfg["nats"].(map[string]any), enrolled["nats"].(map[string]any))
	}
	switch {
	case opts.Enrolled != "":
	case opts.Storage == StoragePresigned:
		cfg["storage"] = map[string]any{"mode": "presigned"}
	default:
		m := e.MinIO()
		cfg["storage"] = map[string]any{"endpoint": m.Endpoint, "secure": false, "bucket": m.Bucket,
			"access_key": m.AccessKey, "secret_key": m.SecretKey, "part_size": "5MiB"}
	}
	if opts.ADB != nil {
		cfg["adb"] = map[string]any{"address": opts.ADB.Addr, "path": opts.ADB.Path}
	}
	var devices []any
	for _, p := range opts.Phones {
		d := map[string]any{"serial": p.Serial}
		if p.WDAURL != "" {
			d = map[string]any{"platform": "ios", "udid": p.Serial, "wda_url": p.WDAURL}
		}
		if p.Simulated {
			d["simulated"] = true
		}
		if p.Tags != nil {
			d["tags"] = p.Tags
		}
		devices = append(devices, d)
	}
	cfg["devices"] = devices
	if opts.OpTimeout != 0 {
		cfg["phones"] = map[string]any{"op_timeout": opts.OpTimeout.String()}
	}
	a.Config = e.writeConfig("edgeagent-"+opts.ID, cfg, opts.Extra)
	return a
}

// Start starts `edgeagent run` with the agent's config, as a further
// instance when one runs already (the state directory's lock refuses it).
func (a *Agent) Start() *Process {
	t := a.env.t
	t.Helper()
	a.Process = Start(t, a.RunCommand(testenv.Binary(t, "edgeagent")))
	return a.Process
}

// RunCommand is `binary run` with the agent's config and environment: for
// a test that runs another build of edgeagent, or runs it under a
// Supervisor.
func (a *Agent) RunCommand(binary string) Command {
	return Command{Path: binary, Args: []string{"run", "-c", a.Config}, ExactEnv: a.opts.Env, Name: "edgeagent " + a.opts.ID}
}

// CLI runs `edgeagent <args>` (without a config: add -c a.Config or -addr
// a.StatusAddr as the command needs) and returns what it printed and its
// exit status.
func (a *Agent) CLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return Run(t, Command{Path: testenv.Binary(t, "edgeagent"), Args: args, ExactEnv: a.opts.Env})
}
