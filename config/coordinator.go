package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Coordinator is the configuration of the edgecoord coordinator. Its yaml
// tags are the keys of the config file; see examples/coordinator.yaml for
// every option.
type Coordinator struct {
	// CoordinatorID names this coordinator instance in logs and metrics.
	// Default: the host name up to its first dot, with characters outside
	// A-Z, a-z, 0-9, _ and - replaced by -.
	CoordinatorID string `yaml:"coordinator_id" json:"coordinator_id"`
	// Log configures the root logger.
	Log Log `yaml:"log" json:"log"`
	// NATS is the connection to the NATS servers.
	NATS NATS `yaml:"nats" json:"nats"`
	// Store is the job store.
	Store Store `yaml:"store" json:"store"`
	// Lease configures job leases.
	Lease CoordinatorLease `yaml:"lease" json:"lease"`
	// Scheduler configures job assignment.
	Scheduler Scheduler `yaml:"scheduler" json:"scheduler"`
	// Schedules configures the evaluation of recurring schedules
	// (docs/schedules.md), not to be confused with Scheduler.
	Schedules CoordinatorSchedules `yaml:"schedules" json:"schedules"`
	// Agents configures agent presence.
	Agents AgentPresence `yaml:"agents" json:"agents"`
	// Jobs configures the jobs the coordinator grants (projects.go).
	Jobs CoordinatorJobs `yaml:"jobs" json:"jobs"`
	// Projects configures projects by name (projects.go).
	Projects map[string]Project `yaml:"projects" json:"projects,omitempty"`
	// Storage is the bucket artifacts are uploaded to, used to presign
	// uploads for agents in presigned mode. Optional; when any field is
	// set, the endpoint, bucket and credentials are required.
	Storage CoordinatorStorage `yaml:"storage" json:"storage"`
	// Outbox publishes accepted results and failures (outbox.go). Optional.
	Outbox CoordinatorOutbox `yaml:"outbox" json:"outbox"`
	// Exports writes the dataset of observations into the storage bucket
	// as Parquet, by project and day (exports.go).
	Exports CoordinatorExports `yaml:"exports" json:"exports"`
	// Metrics is the Prometheus metrics endpoint.
	Metrics Metrics `yaml:"metrics" json:"metrics"`
	// API is the HTTP JSON API for researchers (docs/api.md). Optional.
	API CoordinatorAPI `yaml:"api" json:"api"`
	// Enrollment issues agents NATS identities of their own
	// (enrollment.go). Optional.
	Enrollment CoordinatorEnrollment `yaml:"enrollment" json:"enrollment"`

	warnings []string
}

// Store drivers.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Store configures the job store.
type Store struct {
	// Driver is sqlite or postgres. Default sqlite.
	Driver string `yaml:"driver" json:"driver"`
	// DSN is the PostgreSQL connection URL
	// (postgres://user:password@host:5432/db?sslmode=...), required with
	// driver postgres. It is a secret because it usually holds a password;
	// write the password as ${NAME} to keep it out of the file.
	DSN Secret `yaml:"dsn" json:"dsn,omitempty"`
	// Path is the SQLite database file, used with driver sqlite. Default
	// edgecoord.db, relative to the working directory.
	Path string `yaml:"path" json:"path"`
}

// CoordinatorLease configures job leases.
type CoordinatorLease struct {
	// TTL is how long a lease lasts without renewal. Default 30s.
	TTL Duration `yaml:"ttl" json:"ttl"`
	// ReapInterval is how often expired leases are reclaimed; it must be
	// shorter than TTL. Default 1s.
	ReapInterval Duration `yaml:"reap_interval" json:"reap_interval"`
}

// Scheduler configures job assignment.
type Scheduler struct {
	// Interval is how often pending jobs are matched to idle agents.
	// Default 500ms.
	Interval Duration `yaml:"interval" json:"interval"`
}

// CoordinatorSchedules configures the schedule loop (docs/schedules.md).
type CoordinatorSchedules struct {
	// Interval is how often the schedules due on the database clock are
	// evaluated: a slot fires at most this long after its time while a
	// coordinator runs. Default 1s.
	Interval Duration `yaml:"interval" json:"interval"`
	// MinEvery is the shortest every a schedule may have. Default 1m; at
	// least MinScheduleEvery (values under 1m are meant for tests).
	MinEvery Duration `yaml:"min_every" json:"min_every"`
}

// MinScheduleEvery is the lowest schedules.min_every accepted.
const MinScheduleEvery = Duration(time.Second)

// CoordinatorJobs configures deadlines and attempts of jobs (docs/operations.md,
// "Deadlines, attempts and end states").
type CoordinatorJobs struct {
	// DefaultTimeout is the deadline of a job submitted without a timeout,
	// counted from its first grant; 0 means no deadline. Default 0.
	DefaultTimeout Duration `yaml:"default_timeout" json:"default_timeout"`
	// MaxAttempts is the grant limit of a job submitted without one.
	// Default 3.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// RetryBackoff is the wait before the first retry of an attempt that
	// ended with an infrastructure failure; it doubles with every attempt.
	// Default 2s.
	RetryBackoff Duration `yaml:"retry_backoff" json:"retry_backoff"`
	// RetryBackoffMax caps the doubled backoff; at least RetryBackoff.
	// Default 1m.
	RetryBackoffMax Duration `yaml:"retry_backoff_max" json:"retry_backoff_max"`
	// DefaultMaxRunning bounds the jobs of one project in progress at once,
	// for every project without its own entry under projects; 0 means no
	// limit. Default 0. See docs/operations.md, "Priorities, projects and
	// not_before".
	DefaultMaxRunning int `yaml:"default_max_running" json:"default_max_running"`
}

func (j CoordinatorJobs) validate(ps *Problems, path string) {
	nonNegative(ps, path+".default_timeout", j.DefaultTimeout)
	if j.MaxAttempts < 1 {
		ps.add(path+".max_attempts", "must be at least 1, got %d", j.MaxAttempts)
	}
	positive(ps, path+".retry_backoff", j.RetryBackoff)
	positive(ps, path+".retry_backoff_max", j.RetryBackoffMax)
	if j.RetryBackoff > 0 && j.RetryBackoffMax > 0 && j.RetryBackoffMax < j.RetryBackoff {
		ps.add(path+".retry_backoff_max", "must be at least jobs.retry_backoff (%s), got %s", j.RetryBackoff, j.RetryBackoffMax)
	}
}

// AgentPresence configures how the coordinator tracks agents.
type AgentPresence struct {
	// Heartbeat is how often agents are asked to send a heartbeat.
	// Default 5s.
	Heartbeat Duration `yaml:"heartbeat" json:"heartbeat"`
	// OfflineAfter is how long an agent may stay silent (database clock)
	// before it is offline and gets no new jobs; it must be longer than
	// Heartbeat. Default 15s (three heartbeats).
	OfflineAfter Duration `yaml:"offline_after" json:"offline_after"`
	// RequestRate is how many requests per second one agent may send the
	// coordinator on average, RequestBurst how many at once; past that its
	// requests are answered 503 before any store work, so that a flooding
	// agent costs only itself (docs/security.md, "Agent request budget").
	// Defaults 200 and 400.
	RequestRate  int `yaml:"request_rate" json:"request_rate"`
	RequestBurst int `yaml:"request_burst" json:"request_burst"`
}

// CoordinatorStorage is the bucket the coordinator presigns uploads for.
type CoordinatorStorage struct {
	// S3 is the bucket and its credentials.
	S3 `yaml:",inline"`
	// PresignExpiry is how long a presigned URL stays valid, at most 7
	// days. Default 15m.
	PresignExpiry Duration `yaml:"presign_expiry" json:"presign_expiry"`
}

// Enabled reports whether storage is configured.
func (s CoordinatorStorage) Enabled() bool { return s.S3.configured() }

// MaxPresignExpiry is the longest validity S3 allows for a presigned URL.
const MaxPresignExpiry = Duration(7 * 24 * time.Hour)

// Metrics configures the Prometheus metrics endpoint.
type Metrics struct {
	// Listen is the endpoint's host:port; empty disables it. Default
	// 127.0.0.1:9090.
	Listen string `yaml:"listen" json:"listen"`
}

// CoordinatorAPI configures the HTTP JSON API (docs/api.md).
type CoordinatorAPI struct {
	// Listen is the API's host:port; empty (the default) disables it.
	Listen string `yaml:"listen" json:"listen"`
	// TLSCert and TLSKey are PEM files: with both set the API serves
	// HTTPS; with neither, plain HTTP (put it behind a TLS reverse proxy).
	TLSCert string `yaml:"tls_cert" json:"tls_cert"`
	TLSKey  string `yaml:"tls_key" json:"tls_key"`
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default 1MiB.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes" json:"max_body_bytes"`
	// Rate is how many requests per second one token may make on average,
	// Burst how many at once; beyond that the API answers 429 with
	// Retry-After. Defaults 20 and 40.
	Rate  int `yaml:"rate" json:"rate"`
	Burst int `yaml:"burst" json:"burst"`
	// MCPIdleTimeout closes a session opened through the MCP endpoint
	// (docs/mcp.md) when no tool call used it for this long, releasing its
	// phone. Default 5m; 1s to 1h.
	MCPIdleTimeout Duration `yaml:"mcp_idle_timeout" json:"mcp_idle_timeout"`
	// MaxStreamsPerToken bounds the event streams (/api/v1/events,
	// /api/v1/jobs/{id}/events, /ui/events) and long polls (?wait=) one
	// token holds open at once, MaxStreams those of the whole process;
	// past either the API answers 429 with Retry-After. Defaults 16 and
	// 1024 (docs/security.md, "Limits of the HTTP API").
	MaxStreamsPerToken int `yaml:"max_streams_per_token" json:"max_streams_per_token"`
	MaxStreams         int `yaml:"max_streams" json:"max_streams"`
	// MaxMCPSessionsPerToken bounds the MCP client sessions one token
	// holds open at once; past it a new one is answered 429. Default 16.
	MaxMCPSessionsPerToken int `yaml:"max_mcp_sessions_per_token" json:"max_mcp_sessions_per_token"`
	// ReadTimeout bounds how long a client may take to send a request
	// body; a slower one is cut off. Event streams and long polls, which
	// send no body, are not bound by it. Default 30s; 1s to 10m.
	ReadTimeout Duration `yaml:"read_timeout" json:"read_timeout"`
	// IdleTimeout closes a kept-alive connection with no request for this
	// long. Default 2m; 1s to 1h.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// PublicURL is the scheme and host browsers reach the API and the
	// dashboard at through a reverse proxy (https://fleet.example.com):
	// a dashboard form whose Origin names it is accepted whatever Host the
	// proxy forwards, and with https the session cookie is Secure.
	// Empty (the default): only the request's own Host (docs/ui.md).
	PublicURL string `yaml:"public_url" json:"public_url"`
}

// PublicOrigin is PublicURL as an origin (scheme://host[:port], lower
// case, without a trailing slash); an error says what is wrong with it.
func (a CoordinatorAPI) PublicOrigin() (string, error) {
	u, err := url.Parse(a.PublicURL)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: want http(s)://host[:port]", a.PublicURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: the scheme must be http or https", a.PublicURL)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", fmt.Errorf("%q: want http(s)://host[:port] with no path, user, query or fragment", a.PublicURL)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// TLS reports whether the API serves HTTPS.
func (a CoordinatorAPI) TLS() bool { return a.TLSCert != "" }

func (a CoordinatorAPI) validate(ps *Problems, path string) {
	if a.Listen != "" {
		checkHostPort(ps, path+".listen", a.Listen)
	}
	if (a.TLSCert == "") != (a.TLSKey == "") {
		ps.add(path+".tls_cert", "tls_cert and tls_key go together: set both or neither")
	}
	checkFile(ps, path+".tls_cert", a.TLSCert)
	checkFile(ps, path+".tls_key", a.TLSKey)
	if a.MaxBodyBytes <= 0 {
		ps.add(path+".max_body_bytes", "must be positive, got %s", a.MaxBodyBytes)
	}
	if a.Rate <= 0 {
		ps.add(path+".rate", "must be a positive number of requests per second, got %d", a.Rate)
	}
	if a.Burst < 1 {
		ps.add(path+".burst", "must be at least 1, got %d", a.Burst)
	}
	if d := a.MCPIdleTimeout.Duration(); d < time.Second || d > time.Hour {
		ps.add(path+".mcp_idle_timeout", "must be from 1s to 1h, got %s", a.MCPIdleTimeout)
	}
	if a.PublicURL != "" {
		if _, err := a.PublicOrigin(); err != nil {
			ps.add(path+".public_url", "%v", err)
		}
	}
	if a.MaxStreamsPerToken < 1 {
		ps.add(path+".max_streams_per_token", "must be at least 1, got %d", a.MaxStreamsPerToken)
	}
	if a.MaxStreams < 1 {
		ps.add(path+".max_streams", "must be at least 1, got %d", a.MaxStreams)
	}
	if a.MaxMCPSessionsPerToken < 1 {
		ps.add(path+".max_mcp_sessions_per_token", "must be at least 1, got %d", a.MaxMCPSessionsPerToken)
	}
	if d := a.ReadTimeout.Duration(); d < time.Second || d > 10*time.Minute {
		ps.add(path+".read_timeout", "must be from 1s to 10m, got %s", a.ReadTimeout)
	}
	if d := a.IdleTimeout.Duration(); d < time.Second || d > time.Hour {
		ps.add(path+".idle_timeout", "must be from 1s to 1h, got %s", a.IdleTimeout)
	}
}

// DefaultCoordinator returns the coordinator configuration with every
// default filled in. NATS.URL has no default.
func DefaultCoordinator() *Coordinator {
	return &Coordinator{
		CoordinatorID: defaultCoordinatorID(),
		Log:           defaultLog(),
		NATS:          defaultNATS(),
		Store:         Store{Driver: StoreSQLite, Path: "edgecoord.db"},
		Lease:         CoordinatorLease{TTL: Duration(30 * time.Second), ReapInterval: Duration(time.Second)},
		Scheduler:     Scheduler{Interval: Duration(500 * time.Millisecond)},
		Schedules:     CoordinatorSchedules{Interval: Duration(time.Second), MinEvery: Duration(time.Minute)},
		Agents:        AgentPresence{Heartbeat: Duration(5 * time.Second), OfflineAfter: Duration(15 * time.Second), RequestRate: 200, RequestBurst: 400},
		Jobs:          CoordinatorJobs{MaxAttempts: 3, RetryBackoff: Duration(2 * time.Second), RetryBackoffMax: Duration(time.Minute)},
		Storage:       CoordinatorStorage{S3: S3{Secure: true}, PresignExpiry: Duration(15 * time.Minute)},
		Metrics:       Metrics{Listen: "127.0.0.1:9090"},
		Outbox:        defaultOutbox(),
		Exports:       defaultExports(),
		Enrollment:    defaultEnrollment(),
		API: CoordinatorAPI{MaxBodyBytes: MiB, Rate: 20, Burst: 40, MCPIdleTimeout: Duration(5 * time.Minute),
			MaxStreamsPerToken: 16, MaxStreams: 1024, MaxMCPSessionsPerToken: 16,
			ReadTimeout: Duration(30 * time.Second), IdleTimeout: Duration(2 * time.Minute)},
	}
}

// defaultCoordinatorID derives an id from the host name.
func defaultCoordinatorID() string {
	host, err := os.Hostname()
	if err != nil {
		return "edgecoord"
	}
	host, _, _ = strings.Cut(host, ".")
	id := []byte(host)
	for i, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			id[i] = '-'
		}
	}
	if len(id) > 64 {
		id = id[:64]
	}
	if len(id) == 0 {
		return "edgecoord"
	}
	return string(id)
}

// Warnings returns advice about the configuration that does not stop the
// coordinator, such as a config file holding a secret that other users can
// read. Only the loaders produce warnings.
func (c *Coordinator) Warnings() []string { return c.warnings }

// Validate checks every rule and returns all violations as [Problems] with
// their field paths, or nil. It also checks that the files the
// configuration names exist.
func (c *Coordinator) Validate() error {
	var ps Problems
	validID(&ps, "coordinator_id", c.CoordinatorID)
	c.Log.validate(&ps, "log")
	c.NATS.validate(&ps, "nats")
	c.Store.validate(&ps, "store")
	positive(&ps, "lease.ttl", c.Lease.TTL)
	positive(&ps, "lease.reap_interval", c.Lease.ReapInterval)
	if c.Lease.TTL > 0 && c.Lease.ReapInterval >= c.Lease.TTL {
		ps.add("lease.reap_interval", "must be shorter than lease.ttl (%s), got %s", c.Lease.TTL, c.Lease.ReapInterval)
	}
	positive(&ps, "scheduler.interval", c.Scheduler.Interval)
	positive(&ps, "schedules.interval", c.Schedules.Interval)
	if c.Schedules.MinEvery < MinScheduleEvery {
		ps.add("schedules.min_every", "must be at least %s, got %s", MinScheduleEvery, c.Schedules.MinEvery)
	}
	positive(&ps, "agents.heartbeat", c.Agents.Heartbeat)
	positive(&ps, "agents.offline_after", c.Agents.OfflineAfter)
	if c.Agents.Heartbeat > 0 && c.Agents.OfflineAfter > 0 && c.Agents.OfflineAfter <= c.Agents.Heartbeat {
		ps.add("agents.offline_after", "must be longer than agents.heartbeat (%s), got %s", c.Agents.Heartbeat, c.Agents.OfflineAfter)
	}
	if c.Agents.RequestRate <= 0 {
		ps.add("agents.request_rate", "must be a positive number of requests per second, got %d", c.Agents.RequestRate)
	}
	if c.Agents.RequestBurst < 1 {
		ps.add("agents.request_burst", "must be at least 1, got %d", c.Agents.RequestBurst)
	}
	c.Jobs.validate(&ps, "jobs")
	if c.Storage.Enabled() {
		c.Storage.S3.validate(&ps, "storage", true)
	}
	positive(&ps, "storage.presign_expiry", c.Storage.PresignExpiry)
	if c.Storage.PresignExpiry > MaxPresignExpiry {
		ps.add("storage.presign_expiry", "must be at most %s, got %s", MaxPresignExpiry, c.Storage.PresignExpiry)
	}
	if c.Metrics.Listen != "" {
		checkHostPort(&ps, "metrics.listen", c.Metrics.Listen)
	}
	c.Outbox.validate(&ps, "outbox")
	c.Exports.validate(&ps, "exports")
	c.API.validate(&ps, "api")
	c.Enrollment.validate(&ps, "enrollment")
	c.validateProjects(&ps)
	return ps.Err()
}

func (s Store) validate(ps *Problems, path string) {
	switch s.Driver {
	case StoreSQLite:
		if s.Path == "" {
			ps.add(path+".path", "required with driver sqlite")
		}
		if s.DSN.IsSet() {
			ps.add(path+".dsn", "only used with driver postgres; set %s.driver: postgres or remove it", path)
		}
	case StorePostgres:
		if !s.DSN.IsSet() {
			ps.add(path+".dsn", "required with driver postgres")
			break
		}
		// Neither the DSN nor a parse error (which quotes it) may be shown.
		u, err := url.Parse(s.DSN.Value())
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			ps.add(path+".dsn", "want a URL of the form postgres://user:password@host:5432/database")
		}
	default:
		ps.add(path+".driver", "must be sqlite or postgres, got %q", s.Driver)
	}
}

// resolvePaths makes the relative file names in c relative to dir.
func (c *Coordinator) resolvePaths(dir string) {
	c.NATS.resolvePaths(dir)
	resolvePath(dir, &c.Storage.SecretKeyFile)
	resolvePath(dir, &c.API.TLSCert)
	resolvePath(dir, &c.API.TLSKey)
	resolvePath(dir, &c.Enrollment.NATSDir)
}

// readSecrets reads the secrets named by *_file fields.
func (c *Coordinator) readSecrets(ps *Problems, warnings *[]string) {
	c.NATS.readSecrets(ps, warnings, "nats")
	readSecretFile(ps, warnings, "storage.secret_key_file", &c.Storage.SecretKeyFile, &c.Storage.SecretKey)
}
