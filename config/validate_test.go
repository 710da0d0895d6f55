package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// problemStrings returns the rendered problems in err, nil for a nil err, and
// fails the test for an error that is not Problems.
func problemStrings(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, not Problems: %v", err, err)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func checkProblems(t *testing.T, err error, want []string) {
	t.Helper()
	got := problemStrings(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// validAgent returns an agent configuration that passes Validate.
func validAgent() *Agent {
	a := DefaultAgent()
	a.AgentID = "home-pc-1"
	a.StateDir = filepath.Join(string(filepath.Separator), "var", "lib", "edgeagent")
	if filepath.VolumeName(os.TempDir()) != "" {
		a.StateDir = filepath.VolumeName(os.TempDir()) + a.StateDir
	}
	a.NATS.URL = "nats://127.0.0.1:4222"
	a.Storage.Endpoint = "minio.example.com:9000"
	a.Storage.Bucket = "edge-artifacts"
	a.Storage.AccessKey = "AKIAEXAMPLE"
	a.Storage.SecretKey = "example-secret"
	return a
}

// tempFile creates a file with content in a fresh temp dir and returns its
// path.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAgentValidate(t *testing.T) {
	creds := tempFile(t, "agent.creds", "creds")
	cert := tempFile(t, "cert.pem", "cert")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.creds")

	tests := []struct {
		name   string
		modify func(a *Agent)
		want   []string
	}{
		{"valid", func(a *Agent) {}, nil},
		{"defaults with required fields", func(a *Agent) { *a = *validAgent() }, nil},

		{"agent_id missing", func(a *Agent) { a.AgentID = "" }, []string{"agent_id: required"}},
		{"agent_id with space", func(a *Agent) { a.AgentID = "home pc" }, []string{`agent_id: "home pc": want 1-64 characters from A-Z, a-z, 0-9, _ and -`}},
		{"agent_id with dot", func(a *Agent) { a.AgentID = "pc.1" }, []string{`agent_id: "pc.1": want 1-64 characters from A-Z, a-z, 0-9, _ and -`}},
		{"agent_id 64 chars", func(a *Agent) { a.AgentID = strings.Repeat("a", 64) }, nil},
		{"agent_id 65 chars", func(a *Agent) { a.AgentID = strings.Repeat("a", 65) }, []string{`agent_id: "` + strings.Repeat("a", 65) + `": want 1-64 characters from A-Z, a-z, 0-9, _ and -`}},

		{"state_dir missing", func(a *Agent) { a.StateDir = "" }, []string{"state_dir: required"}},
		{"state_dir relative", func(a *Agent) { a.StateDir = "state" }, []string{`state_dir: "state": must be an absolute path`}},

		{"log level", func(a *Agent) { a.Log.Level = "verbose" }, []string{`log.level: must be one of trace, debug, info, warn, error, got "verbose"`}},
		{"log format", func(a *Agent) { a.Log.Format = "text" }, []string{`log.format: must be json or console, got "text"`}},
		{"log console debug", func(a *Agent) { a.Log = Log{Level: "debug", Format: "console"} }, nil},

		{"nats url missing", func(a *Agent) { a.NATS.URL = "" }, []string{"nats.url: required"}},
		{"nats url blank", func(a *Agent) { a.NATS.URL = "  " }, []string{"nats.url: required"}},
		{"nats url list", func(a *Agent) { a.NATS.URL = "nats://a:4222, tls://b:4222,ws://c:80,wss://d" }, nil},
		{"nats url empty entry", func(a *Agent) { a.NATS.URL = "nats://a:4222,,nats://b:4222" }, []string{"nats.url: empty entry in comma-separated list"}},
		{"nats url no scheme", func(a *Agent) { a.NATS.URL = "localhost:4222" }, []string{`nats.url: "localhost:4222": want scheme://host:port with scheme nats, tls, ws or wss`}},
		{"nats url http", func(a *Agent) { a.NATS.URL = "http://a:4222" }, []string{`nats.url: "http://a:4222": want scheme://host:port with scheme nats, tls, ws or wss`}},
		{"nats url credentials", func(a *Agent) { a.NATS.URL = "nats://edge:s3cret@a:4222" }, []string{"nats.url: nats://edge:xxxxx@a:4222: must not contain credentials; use nats.user and nats.password or a creds file"}},
		{"nats url unparsable", func(a *Agent) { a.NATS.URL = "nats://a b:%zz" }, []string{"nats.url: invalid URL"}},

		{"creds file", func(a *Agent) { a.NATS.CredsFile = creds }, nil},
		{"creds file missing", func(a *Agent) { a.NATS.CredsFile = missing }, []string{"nats.creds_file: file " + missing + " does not exist"}},
		{"creds file is a directory", func(a *Agent) { a.NATS.CredsFile = dir }, []string{"nats.creds_file: " + dir + " is not a regular file"}},
		{"creds and user", func(a *Agent) { a.NATS.CredsFile = creds; a.NATS.User = "u"; a.NATS.Password = "p" }, []string{"nats.user: conflicts with nats.creds_file; configure one authentication method"}},
		{"nkey and token", func(a *Agent) { a.NATS.NKeyFile = creds; a.NATS.Token = "t" }, []string{"nats.token: conflicts with nats.nkey_file; configure one authentication method"}},
		{"three methods", func(a *Agent) { a.NATS.CredsFile = creds; a.NATS.NKeyFile = creds; a.NATS.TokenFile = creds }, []string{
			"nats.nkey_file: conflicts with nats.creds_file; configure one authentication method",
			"nats.token: conflicts with nats.creds_file; configure one authentication method",
		}},
		{"user and password", func(a *Agent) { a.NATS.User = "u"; a.NATS.Password = "p" }, nil},
		{"user and password file", func(a *Agent) { a.NATS.User = "u"; a.NATS.PasswordFile = creds }, nil},
		{"user without password", func(a *Agent) { a.NATS.User = "u" }, []string{"nats.password: required with nats.user (or set nats.password_file)"}},
		{"password without user", func(a *Agent) { a.NATS.Password = "p" }, []string{"nats.password: needs nats.user"}},
		{"password file without user", func(a *Agent) { a.NATS.PasswordFile = creds }, []string{"nats.password_file: needs nats.user"}},
		{"password and password file", func(a *Agent) { a.NATS.User = "u"; a.NATS.Password = "p"; a.NATS.PasswordFile = creds }, []string{"nats.password_file: conflicts with nats.password; set one of them"}},
		{"password file missing", func(a *Agent) { a.NATS.User = "u"; a.NATS.PasswordFile = missing }, []string{"nats.password_file: file " + missing + " does not exist"}},
		{"token", func(a *Agent) { a.NATS.Token = "t" }, nil},
		{"token and token file", func(a *Agent) { a.NATS.Token = "t"; a.NATS.TokenFile = creds }, []string{"nats.token_file: conflicts with nats.token; set one of them"}},
		{"token file missing", func(a *Agent) { a.NATS.TokenFile = missing }, []string{"nats.token_file: file " + missing + " does not exist"}},
		{"nkey file missing", func(a *Agent) { a.NATS.NKeyFile = missing }, []string{"nats.nkey_file: file " + missing + " does not exist"}},

		{"tls complete", func(a *Agent) { a.NATS.TLS = TLS{CAFile: cert, CertFile: cert, KeyFile: cert} }, nil},
		{"tls cert without key", func(a *Agent) { a.NATS.TLS.CertFile = cert }, []string{"nats.tls.key_file: required with nats.tls.cert_file"}},
		{"tls key without cert", func(a *Agent) { a.NATS.TLS.KeyFile = cert }, []string{"nats.tls.cert_file: required with nats.tls.key_file"}},
		{"tls ca missing", func(a *Agent) { a.NATS.TLS.CAFile = missing }, []string{"nats.tls.ca_file: file " + missing + " does not exist"}},

		{"reconnect_wait zero", func(a *Agent) { a.NATS.ReconnectWait = 0 }, []string{"nats.reconnect_wait: must be positive, got 0s"}},
		{"request_timeout negative", func(a *Agent) { a.NATS.RequestTimeout = Duration(-time.Second) }, []string{"nats.request_timeout: must be positive, got -1s"}},

		{"safety_margin zero", func(a *Agent) { a.Lease.SafetyMargin = 0 }, []string{"lease.safety_margin: must be positive, got 0s"}},

		{"concurrency zero", func(a *Agent) { a.Jobs.Concurrency = 0 }, []string{"jobs.concurrency: must be at least 1, got 0"}},
		{"shutdown_timeout zero", func(a *Agent) { a.Jobs.ShutdownTimeout = 0 }, nil},
		{"shutdown_timeout negative", func(a *Agent) { a.Jobs.ShutdownTimeout = Duration(-time.Second) }, []string{"jobs.shutdown_timeout: must not be negative, got -1s"}},

		{"storage mode", func(a *Agent) { a.Storage.Mode = "s3" }, []string{`storage.mode: must be direct or presigned, got "s3"`}},
		{"direct needs location and credentials", func(a *Agent) { a.Storage.S3 = S3{Secure: true} }, []string{
			"storage.endpoint: required",
			"storage.bucket: required",
			"storage.access_key: required",
			"storage.secret_key: required (or set storage.secret_key_file)",
		}},
		{"presigned needs nothing", func(a *Agent) { a.Storage.Mode = StoragePresigned; a.Storage.S3 = S3{} }, nil},
		{"presigned still checks what is set", func(a *Agent) { a.Storage.Mode = StoragePresigned; a.Storage.S3 = S3{Bucket: "B"} }, []string{
			`storage.bucket: "B" is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens)`,
		}},
		{"endpoint with scheme", func(a *Agent) { a.Storage.Endpoint = "https://minio:9000" }, []string{`storage.endpoint: "https://minio:9000": want host[:port] without a scheme; storage.secure selects https`}},
		{"endpoint with path", func(a *Agent) { a.Storage.Endpoint = "minio:9000/bucket" }, []string{`storage.endpoint: "minio:9000/bucket": want host[:port] only`}},
		{"bucket uppercase", func(a *Agent) { a.Storage.Bucket = "Edge_Artifacts" }, []string{`storage.bucket: "Edge_Artifacts" is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens)`}},
		{"bucket too short", func(a *Agent) { a.Storage.Bucket = "ab" }, []string{`storage.bucket: "ab" is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens)`}},
		{"secret key file", func(a *Agent) { a.Storage.SecretKey = ""; a.Storage.SecretKeyFile = creds }, nil},
		{"secret key and file", func(a *Agent) { a.Storage.SecretKeyFile = creds }, []string{"storage.secret_key_file: conflicts with storage.secret_key; set one of them"}},
		{"secret key file missing", func(a *Agent) { a.Storage.SecretKey = ""; a.Storage.SecretKeyFile = missing }, []string{"storage.secret_key_file: file " + missing + " does not exist"}},
		{"part size 5MiB", func(a *Agent) { a.Storage.PartSize = 5 * MiB }, nil},
		{"part size too small", func(a *Agent) { a.Storage.PartSize = 5*MiB - 1 }, []string{"storage.part_size: must be between 5MiB and 5GiB, got 5242879"}},
		{"part size too large", func(a *Agent) { a.Storage.PartSize = 6 * GiB }, []string{"storage.part_size: must be between 5MiB and 5GiB, got 6GiB"}},
		{"parallelism zero", func(a *Agent) { a.Storage.Parallelism = 0 }, []string{"storage.parallelism: must be at least 1, got 0"}},
		{"bandwidth limit", func(a *Agent) { a.Storage.BandwidthLimit = 2 * MiB }, nil},
		{"bandwidth limit negative", func(a *Agent) { a.Storage.BandwidthLimit = -1 }, []string{"storage.bandwidth_limit: must not be negative"}},

		{"adb address missing", func(a *Agent) { a.ADB.Address = "" }, []string{"adb.address: required"}},
		{"adb address without port", func(a *Agent) { a.ADB.Address = "localhost" }, []string{`adb.address: "localhost": want host:port`}},
		{"adb address bad port", func(a *Agent) { a.ADB.Address = "localhost:99999" }, []string{`adb.address: "localhost:99999": invalid port "99999"`}},
		{"adb path missing", func(a *Agent) { a.ADB.Path = "" }, []string{"adb.path: required"}},

		{"devices", func(a *Agent) { a.Devices = []Device{{Serial: "a", Tags: []string{"x"}}, {Serial: "b"}} }, nil},
		{"device serial missing", func(a *Agent) { a.Devices = []Device{{Serial: "a"}, {}} }, []string{"devices[1].serial: required"}},
		{"device serial duplicate", func(a *Agent) { a.Devices = []Device{{Serial: "a"}, {Serial: "b"}, {Serial: "a"}} }, []string{`devices[2].serial: "a" is already listed as devices[0]`}},
		{"iphone", func(a *Agent) {
			a.Devices = []Device{{Serial: "a"}, {Platform: "ios", UDID: "u1", WDAURL: "http://192.168.1.23:8100"}}
		}, nil},
		{"iphone udid missing", func(a *Agent) { a.Devices = []Device{{Platform: "ios", WDAURL: "http://h:8100"}} }, []string{"devices[0].udid: required"}},
		{"iphone udid same as a serial", func(a *Agent) {
			a.Devices = []Device{{Serial: "u1"}, {Platform: "ios", UDID: "u1", WDAURL: "http://h:8100"}}
		}, []string{`devices[1].udid: "u1" is already listed as devices[0]`}},
		{"iphone wda_url missing", func(a *Agent) { a.Devices = []Device{{Platform: "ios", UDID: "u1"}} }, []string{"devices[0].wda_url: required: WebDriverAgent's URL on the iPhone, such as http://192.168.1.23:8100"}},
		{"iphone wda_url not http", func(a *Agent) { a.Devices = []Device{{Platform: "ios", UDID: "u1", WDAURL: "tcp://h:8100"}} }, []string{`devices[0].wda_url: must be an http:// or https:// URL, got "tcp://h:8100"`}},
		{"iphone wda_url with a query", func(a *Agent) { a.Devices = []Device{{Platform: "ios", UDID: "u1", WDAURL: "http://h:8100/?a=b"}} }, []string{"devices[0].wda_url: must not carry user info, a query or a fragment"}},
		{"iphone with a serial", func(a *Agent) {
			a.Devices = []Device{{Platform: "ios", UDID: "u1", Serial: "s", WDAURL: "http://h:8100"}}
		}, []string{"devices[0].serial: not for iPhones: an iPhone is named by its udid"}},
		{"iphone simulated", func(a *Agent) {
			a.Devices = []Device{{Platform: "ios", UDID: "u1", WDAURL: "http://h:8100", Simulated: true}}
		}, []string{"devices[0].simulated: simulated phones are Android phones; remove platform or simulated"}},
		{"android with a udid", func(a *Agent) { a.Devices = []Device{{Serial: "a", UDID: "u", WDAURL: "http://h"}} }, []string{"devices[0].udid: only for iPhones (platform: ios); an Android phone is named by its serial", "devices[0].wda_url: only for iPhones (platform: ios)"}},
		{"device platform unknown", func(a *Agent) { a.Devices = []Device{{Serial: "a", Platform: "symbian"}} }, []string{`devices[0].platform: must be android or ios, got "symbian"`}},
		{"device empty tag", func(a *Agent) { a.Devices = []Device{{Serial: "a", Tags: []string{"x", ""}}} }, []string{"devices[0].tags[1]: must not be empty"}},

		{"status listen ipv6 loopback", func(a *Agent) { a.Status.Listen = "[::1]:7070" }, nil},
		{"status listen localhost", func(a *Agent) { a.Status.Listen = "localhost:0" }, nil},
		{"status listen 127.0.0.2", func(a *Agent) { a.Status.Listen = "127.0.0.2:7070" }, nil},
		{"status listen missing", func(a *Agent) { a.Status.Listen = "" }, []string{"status.listen: required"}},
		{"status listen all interfaces", func(a *Agent) { a.Status.Listen = ":7070" }, []string{`status.listen: ":7070": must be a loopback address such as 127.0.0.1:7070 or [::1]:7070`}},
		{"status listen unspecified", func(a *Agent) { a.Status.Listen = "0.0.0.0:7070" }, []string{`status.listen: "0.0.0.0:7070": must be a loopback address such as 127.0.0.1:7070 or [::1]:7070`}},
		{"status listen LAN", func(a *Agent) { a.Status.Listen = "192.168.1.10:7070" }, []string{`status.listen: "192.168.1.10:7070": must be a loopback address such as 127.0.0.1:7070 or [::1]:7070`}},
		{"status listen host name", func(a *Agent) { a.Status.Listen = "home-pc:7070" }, []string{`status.listen: "home-pc:7070": must be a loopback address such as 127.0.0.1:7070 or [::1]:7070`}},

		{"several problems at once", func(a *Agent) { a.AgentID = ""; a.NATS.URL = ""; a.Jobs.Concurrency = -1 }, []string{
			"agent_id: required",
			"nats.url: required",
			"jobs.concurrency: must be at least 1, got -1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validAgent()
			tt.modify(a)
			checkProblems(t, a.Validate(), tt.want)
		})
	}
}

func TestDefaultAgent(t *testing.T) {
	a := DefaultAgent()
	if a.Log != (Log{Level: "info", Format: "json"}) ||
		a.NATS.ReconnectWait.Duration() != 2*time.Second || a.NATS.RequestTimeout.Duration() != 5*time.Second ||
		a.Lease.SafetyMargin.Duration() != 2*time.Second ||
		a.Jobs != (Jobs{Concurrency: 1, ShutdownTimeout: Duration(30 * time.Second)}) ||
		a.Storage.Mode != StorageDirect || !a.Storage.Secure || a.Storage.PartSize != 16*MiB || a.Storage.Parallelism != 4 || a.Storage.BandwidthLimit != 0 ||
		a.ADB != (ADB{Address: "127.0.0.1:5037", Path: "adb"}) ||
		a.Status.Listen != "127.0.0.1:7070" || a.StateDir != defaultStateDir {
		t.Fatalf("DefaultAgent() = %+v", a)
	}
	// Only the fields without a default are missing.
	checkProblems(t, a.Validate(), []string{
		"agent_id: required",
		"nats.url: required",
		"storage.endpoint: required",
		"storage.bucket: required",
		"storage.access_key: required",
		"storage.secret_key: required (or set storage.secret_key_file)",
	})
}

// validCoordinator returns a coordinator configuration that passes Validate.
func validCoordinator() *Coordinator {
	c := DefaultCoordinator()
	c.NATS.URL = "nats://127.0.0.1:4222"
	return c
}

func TestCoordinatorValidate(t *testing.T) {
	secret := tempFile(t, "s3-secret", "secret")
	withStorage := func(c *Coordinator) {
		c.Storage.Endpoint = "minio:9000"
		c.Storage.Bucket = "edge-artifacts"
		c.Storage.AccessKey = "AK"
		c.Storage.SecretKey = "SK"
	}
	tests := []struct {
		name   string
		modify func(c *Coordinator)
		want   []string
	}{
		{"valid", func(c *Coordinator) {}, nil},
		{"coordinator_id missing", func(c *Coordinator) { c.CoordinatorID = "" }, []string{"coordinator_id: required"}},
		{"coordinator_id invalid", func(c *Coordinator) { c.CoordinatorID = "vps.example.com" }, []string{`coordinator_id: "vps.example.com": want 1-64 characters from A-Z, a-z, 0-9, _ and -`}},
		{"log level", func(c *Coordinator) { c.Log.Level = "loud" }, []string{`log.level: must be one of trace, debug, info, warn, error, got "loud"`}},
		{"nats url missing", func(c *Coordinator) { c.NATS.URL = "" }, []string{"nats.url: required"}},
		{"nats conflicting auth", func(c *Coordinator) { c.NATS.User = "u"; c.NATS.Password = "p"; c.NATS.Token = "t" }, []string{"nats.token: conflicts with nats.user; configure one authentication method"}},

		{"store driver", func(c *Coordinator) { c.Store.Driver = "mysql" }, []string{`store.driver: must be sqlite or postgres, got "mysql"`}},
		{"sqlite path missing", func(c *Coordinator) { c.Store.Path = "" }, []string{"store.path: required with driver sqlite"}},
		{"sqlite with dsn", func(c *Coordinator) { c.Store.DSN = "postgres://u:p@h/db" }, []string{"store.dsn: only used with driver postgres; set store.driver: postgres or remove it"}},
		{"postgres", func(c *Coordinator) {
			c.Store.Driver = StorePostgres
			c.Store.DSN = "postgres://u:p@127.0.0.1:5432/db?sslmode=disable"
		}, nil},
		{"postgresql scheme", func(c *Coordinator) { c.Store.Driver = StorePostgres; c.Store.DSN = "postgresql://u@h/db" }, nil},
		{"postgres without dsn", func(c *Coordinator) { c.Store.Driver = StorePostgres }, []string{"store.dsn: required with driver postgres"}},
		{"postgres key-value dsn", func(c *Coordinator) { c.Store.Driver = StorePostgres; c.Store.DSN = "host=h password=p" }, []string{"store.dsn: want a URL of the form postgres://user:password@host:5432/database"}},
		{"postgres wrong scheme", func(c *Coordinator) { c.Store.Driver = StorePostgres; c.Store.DSN = "mysql://u:p@h/db" }, []string{"store.dsn: want a URL of the form postgres://user:password@host:5432/database"}},

		{"ttl zero", func(c *Coordinator) { c.Lease.TTL = 0 }, []string{"lease.ttl: must be positive, got 0s"}},
		{"reap interval zero", func(c *Coordinator) { c.Lease.ReapInterval = 0 }, []string{"lease.reap_interval: must be positive, got 0s"}},
		{"reap interval not below ttl", func(c *Coordinator) { c.Lease.ReapInterval = c.Lease.TTL }, []string{"lease.reap_interval: must be shorter than lease.ttl (30s), got 30s"}},
		{"scheduler interval", func(c *Coordinator) { c.Scheduler.Interval = -1 }, []string{"scheduler.interval: must be positive, got -1ns"}},
		{"schedules interval", func(c *Coordinator) { c.Schedules.Interval = 0 }, []string{"schedules.interval: must be positive, got 0s"}},
		{"schedules min every", func(c *Coordinator) { c.Schedules.MinEvery = Duration(500 * time.Millisecond) }, []string{"schedules.min_every: must be at least 1s, got 500ms"}},
		{"heartbeat zero", func(c *Coordinator) { c.Agents.Heartbeat = 0 }, []string{"agents.heartbeat: must be positive, got 0s"}},
		{"offline zero", func(c *Coordinator) { c.Agents.OfflineAfter = 0 }, []string{"agents.offline_after: must be positive, got 0s"}},
		{"offline not above heartbeat", func(c *Coordinator) { c.Agents.OfflineAfter = c.Agents.Heartbeat }, []string{"agents.offline_after: must be longer than agents.heartbeat (5s), got 5s"}},
		{"agent request budget", func(c *Coordinator) { c.Agents.RequestRate, c.Agents.RequestBurst = 0, 0 }, []string{
			"agents.request_rate: must be a positive number of requests per second, got 0",
			"agents.request_burst: must be at least 1, got 0",
		}},

		{"jobs defaults", func(c *Coordinator) { c.Jobs.DefaultTimeout = Duration(90 * time.Second) }, nil},
		{"jobs timeout negative", func(c *Coordinator) { c.Jobs.DefaultTimeout = -1 }, []string{"jobs.default_timeout: must not be negative, got -1ns"}},
		{"jobs max attempts zero", func(c *Coordinator) { c.Jobs.MaxAttempts = 0 }, []string{"jobs.max_attempts: must be at least 1, got 0"}},
		{"jobs backoff zero", func(c *Coordinator) { c.Jobs.RetryBackoff = 0 }, []string{"jobs.retry_backoff: must be positive, got 0s"}},
		{"jobs backoff cap below backoff", func(c *Coordinator) { c.Jobs.RetryBackoffMax = Duration(time.Second) }, []string{"jobs.retry_backoff_max: must be at least jobs.retry_backoff (2s), got 1s"}},

		{"storage", withStorage, nil},
		{"storage with key file", func(c *Coordinator) { withStorage(c); c.Storage.SecretKey = ""; c.Storage.SecretKeyFile = secret }, nil},
		{"storage partial", func(c *Coordinator) { c.Storage.Endpoint = "minio:9000" }, []string{
			"storage.bucket: required",
			"storage.access_key: required",
			"storage.secret_key: required (or set storage.secret_key_file)",
		}},
		{"storage endpoint scheme", func(c *Coordinator) { withStorage(c); c.Storage.Endpoint = "http://minio:9000" }, []string{`storage.endpoint: "http://minio:9000": want host[:port] without a scheme; storage.secure selects https`}},
		{"presign expiry zero", func(c *Coordinator) { c.Storage.PresignExpiry = 0 }, []string{"storage.presign_expiry: must be positive, got 0s"}},
		{"presign expiry 7 days", func(c *Coordinator) { c.Storage.PresignExpiry = MaxPresignExpiry }, nil},
		{"presign expiry too long", func(c *Coordinator) { c.Storage.PresignExpiry = MaxPresignExpiry + 1 }, []string{"storage.presign_expiry: must be at most 168h0m0s, got 168h0m0.000000001s"}},

		{"metrics disabled", func(c *Coordinator) { c.Metrics.Listen = "" }, nil},
		{"metrics on all interfaces", func(c *Coordinator) { c.Metrics.Listen = ":9090" }, nil},
		{"metrics invalid", func(c *Coordinator) { c.Metrics.Listen = "9090" }, []string{`metrics.listen: "9090": want host:port`}},

		{"api", func(c *Coordinator) { c.API.Listen = "127.0.0.1:8443"; c.API.TLSCert, c.API.TLSKey = secret, secret }, nil},
		{"api invalid listen", func(c *Coordinator) { c.API.Listen = "8443" }, []string{`api.listen: "8443": want host:port`}},
		{"api cert without key", func(c *Coordinator) { c.API.TLSCert = secret }, []string{"api.tls_cert: tls_cert and tls_key go together: set both or neither"}},
		{"api missing key", func(c *Coordinator) { c.API.TLSCert, c.API.TLSKey = secret, "/nonexistent/key.pem" }, []string{"api.tls_key: file /nonexistent/key.pem does not exist"}},
		{"api limits", func(c *Coordinator) { c.API.MaxBodyBytes, c.API.Rate, c.API.Burst = 0, 0, 0 }, []string{
			"api.max_body_bytes: must be positive, got 0",
			"api.rate: must be a positive number of requests per second, got 0",
			"api.burst: must be at least 1, got 0",
		}},
		{"api mcp idle timeout short", func(c *Coordinator) { c.API.MCPIdleTimeout = Duration(500 * time.Millisecond) }, []string{"api.mcp_idle_timeout: must be from 1s to 1h, got 500ms"}},
		{"api mcp idle timeout long", func(c *Coordinator) { c.API.MCPIdleTimeout = Duration(2 * time.Hour) }, []string{"api.mcp_idle_timeout: must be from 1s to 1h, got 2h0m0s"}},
		{"exports every short", func(c *Coordinator) { c.Exports.Every = Duration(500 * time.Millisecond) }, []string{"exports.every: must be 0 (off) or from 1s to 24h0m0s, got 500ms"}},
		{"exports every long", func(c *Coordinator) { c.Exports.Every = Duration(25 * time.Hour) }, []string{"exports.every: must be 0 (off) or from 1s to 24h0m0s, got 25h0m0s"}},
		{"exports off", func(c *Coordinator) { c.Exports.Every = 0 }, nil},
		{"exports after short", func(c *Coordinator) { c.Exports.After = Duration(30 * time.Second) }, []string{"exports.after: must be from 1m0s to 168h0m0s, got 30s"}},
		{"exports after long", func(c *Coordinator) { c.Exports.After = Duration(169 * time.Hour) }, []string{"exports.after: must be from 1m0s to 168h0m0s, got 169h0m0s"}},
		{"exports file rows zero", func(c *Coordinator) { c.Exports.FileRows = 0 }, []string{"exports.file_rows: must be from 1 to 100000000, got 0"}},
		{"exports file rows many", func(c *Coordinator) { c.Exports.FileRows = MaxExportFileRows + 1 }, []string{"exports.file_rows: must be from 1 to 100000000, got 100000001"}},
		{"api public url", func(c *Coordinator) { c.API.PublicURL = "https://fleet.example.com" }, nil},
		{"api public url with port and slash", func(c *Coordinator) { c.API.PublicURL = "http://fleet.example.com:8443/" }, nil},
		{"api public url without scheme", func(c *Coordinator) { c.API.PublicURL = "fleet.example.com" }, []string{`api.public_url: "fleet.example.com": the scheme must be http or https`}},
		{"api public url with path", func(c *Coordinator) { c.API.PublicURL = "https://example.com/fleet" }, []string{`api.public_url: "https://example.com/fleet": want http(s)://host[:port] with no path, user, query or fragment`}},
		{"api public url ftp", func(c *Coordinator) { c.API.PublicURL = "ftp://example.com" }, []string{`api.public_url: "ftp://example.com": the scheme must be http or https`}},
		{"api stream and session caps", func(c *Coordinator) {
			c.API.MaxStreamsPerToken, c.API.MaxStreams, c.API.MaxMCPSessionsPerToken = 0, -1, 0
		}, []string{
			"api.max_streams_per_token: must be at least 1, got 0",
			"api.max_streams: must be at least 1, got -1",
			"api.max_mcp_sessions_per_token: must be at least 1, got 0",
		}},
		{"api read timeout short", func(c *Coordinator) { c.API.ReadTimeout = Duration(0) }, []string{"api.read_timeout: must be from 1s to 10m, got 0s"}},
		{"api idle timeout long", func(c *Coordinator) { c.API.IdleTimeout = Duration(2 * time.Hour) }, []string{"api.idle_timeout: must be from 1s to 1h, got 2h0m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCoordinator()
			tt.modify(c)
			checkProblems(t, c.Validate(), tt.want)
		})
	}
}

func TestDefaultCoordinator(t *testing.T) {
	c := DefaultCoordinator()
	if !idPattern.MatchString(c.CoordinatorID) ||
		c.Store != (Store{Driver: "sqlite", Path: "edgecoord.db"}) ||
		c.Lease != (CoordinatorLease{TTL: Duration(30 * time.Second), ReapInterval: Duration(time.Second)}) ||
		c.Scheduler.Interval.Duration() != 500*time.Millisecond ||
		c.Agents != (AgentPresence{Heartbeat: Duration(5 * time.Second), OfflineAfter: Duration(15 * time.Second), RequestRate: 200, RequestBurst: 400}) ||
		c.Jobs != (CoordinatorJobs{MaxAttempts: 3, RetryBackoff: Duration(2 * time.Second), RetryBackoffMax: Duration(time.Minute)}) ||
		c.Storage.PresignExpiry.Duration() != 15*time.Minute || !c.Storage.Secure || c.Storage.Enabled() ||
		c.Metrics.Listen != "127.0.0.1:9090" ||
		c.API != (CoordinatorAPI{MaxBodyBytes: MiB, Rate: 20, Burst: 40, MCPIdleTimeout: Duration(5 * time.Minute),
			MaxStreamsPerToken: 16, MaxStreams: 1024, MaxMCPSessionsPerToken: 16,
			ReadTimeout: Duration(30 * time.Second), IdleTimeout: Duration(2 * time.Minute)}) {
		t.Fatalf("DefaultCoordinator() = %+v", c)
	}
	checkProblems(t, c.Validate(), []string{"nats.url: required"})
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "c.yaml", Line: 7, Col: 3, Msg: `unknown field "bogus"`}, `c.yaml:7:3: unknown field "bogus"`},
		{Problem{File: "c.yaml", Line: 7, Col: 3, Path: "nats", Msg: `unknown field "bogus"`}, `c.yaml:7:3: nats: unknown field "bogus"`},
		{Problem{File: "c.yaml", Path: "nats.url", Msg: "required"}, `c.yaml: nats.url: required`},
		{Problem{Path: "nats.url", Msg: "required"}, `nats.url: required`},
		{Problem{Line: 2, Col: 1, Msg: "x"}, `2:1: x`},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	ps := Problems{{Path: "a", Msg: "x"}, {Path: "b", Msg: "y"}}
	if ps.Error() != "a: x\nb: y" {
		t.Errorf("Error() = %q", ps.Error())
	}
	if Problems(nil).Err() != nil {
		t.Error("empty Problems.Err() is not nil")
	}
}
