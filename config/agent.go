package config

import (
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// Agent is the configuration of the edgeagent daemon. Its yaml tags are the
// keys of the config file; see examples/agent.yaml for every option.
type Agent struct {
	// AgentID names this agent to the coordinator and in NATS subjects.
	// Required; 1-64 characters from A-Z, a-z, 0-9, _ and -.
	AgentID string `yaml:"agent_id" json:"agent_id"`
	// StateDir holds the agent's local state (upload spool, operation
	// logs). An absolute path; default /var/lib/edgeagent on Unix and
	// C:\ProgramData\edgeagent on Windows.
	StateDir string `yaml:"state_dir" json:"state_dir"`
	// Log configures the root logger.
	Log Log `yaml:"log" json:"log"`
	// NATS is the connection to the coordinator's NATS servers.
	NATS NATS `yaml:"nats" json:"nats"`
	// Lease configures how the agent guards its job leases.
	Lease AgentLease `yaml:"lease" json:"lease"`
	// Jobs configures job execution.
	Jobs Jobs `yaml:"jobs" json:"jobs"`
	// Storage is where captured artifacts are uploaded.
	Storage AgentStorage `yaml:"storage" json:"storage"`
	// ADB locates the adb server and binary.
	ADB ADB `yaml:"adb" json:"adb"`
	// Devices lists the phones this agent offers; empty means every phone
	// the adb server reports.
	Devices []Device `yaml:"devices" json:"devices,omitempty"`
	// Phones configures how the agent looks after its phones (phones.go).
	Phones Phones `yaml:"phones" json:"phones"`
	// Status is the local status endpoint.
	Status Status `yaml:"status" json:"status"`
	// Sleep configures how the agent keeps the PC awake during jobs.
	Sleep Sleep `yaml:"sleep" json:"sleep"`
	// Update configures signed self-updates (docs/updates.md).
	Update AgentUpdate `yaml:"update" json:"update"`

	warnings []string
}

// AgentLease configures the agent's side of a job lease.
type AgentLease struct {
	// SafetyMargin is subtracted from the lease TTL when the agent computes
	// its own deadline (send time of the last accepted renewal + TTL −
	// SafetyMargin), after which it stops the job on its own. Default 2s.
	SafetyMargin Duration `yaml:"safety_margin" json:"safety_margin"`
}

// Jobs configures job execution.
type Jobs struct {
	// Concurrency is how many jobs run at once. Default 1.
	Concurrency int `yaml:"concurrency" json:"concurrency"`
	// ShutdownTimeout bounds how long a stopping agent waits for running
	// jobs before it cancels them. Default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
}

// Storage modes.
const (
	// StorageDirect: the agent holds S3 credentials and uploads itself.
	StorageDirect = "direct"
	// StoragePresigned: the agent asks the coordinator for presigned URLs
	// and holds no S3 credentials.
	StoragePresigned = "presigned"
)

// AgentStorage configures artifact uploads.
type AgentStorage struct {
	// Mode is direct or presigned. Default direct. Direct mode requires
	// the endpoint, bucket, access key and secret key; presigned mode
	// requires none of them and refuses the access key and secret key.
	Mode string `yaml:"mode" json:"mode"`
	// S3 is the bucket and its credentials.
	S3 `yaml:",inline"`
	// PartSize is the multipart upload part size, at least 5MiB and at
	// most 5GiB. Default 16MiB.
	PartSize ByteSize `yaml:"part_size" json:"part_size"`
	// Parallelism is how many parts are uploaded at once. Default 4.
	Parallelism int `yaml:"parallelism" json:"parallelism"`
	// BandwidthLimit caps upload throughput in bytes per second; 0 means
	// no limit. Default 0.
	BandwidthLimit ByteSize `yaml:"bandwidth_limit" json:"bandwidth_limit"`
}

// Multipart part size limits of S3.
const (
	MinPartSize = 5 * MiB
	MaxPartSize = 5 * GiB
)

// ADB locates the adb server and binary.
type ADB struct {
	// Address is the adb server's host:port. Default 127.0.0.1:5037.
	Address string `yaml:"address" json:"address"`
	// Path is the adb binary, used to start the server when it is not
	// running; a bare name is looked up in PATH. Default adb.
	Path string `yaml:"path" json:"path"`
	// ServerPort, when set, makes the agent start and supervise an adb
	// server of its own on 127.0.0.1:ServerPort (`adb -P PORT
	// start-server`), which every adb call of the agent uses in place of
	// Address: another adb on the PC (`adb kill-server`) cannot kill it.
	// Default 0: use the server at Address (docs/operations.md, The
	// agent's own adb server).
	ServerPort int `yaml:"server_port" json:"server_port,omitempty"`
	// KeysDir is given to the agent's own adb server as ADB_VENDOR_KEYS:
	// the directory holding the adbkey the phones accepted. Only with
	// ServerPort.
	KeysDir string `yaml:"keys_dir" json:"keys_dir,omitempty"`
}

// Device is a phone the agent offers.
type Device struct {
	// Platform is android (the default) or ios. An iPhone is driven through
	// WebDriverAgent running on it (docs/capture.md, iPhones).
	Platform string `yaml:"platform" json:"platform,omitempty"`
	// Serial is the adb serial of an Android phone. Required and unique
	// for Android phones; not for iPhones (UDID).
	Serial string `yaml:"serial" json:"serial,omitempty"`
	// UDID identifies an iPhone (its serial everywhere else: jobs,
	// the coordinator, the status page). Required for iPhones.
	UDID string `yaml:"udid" json:"udid,omitempty"`
	// WDAURL is the base URL of the iPhone's WebDriverAgent, such as
	// http://192.168.1.23:8100 on the LAN or http://127.0.0.1:8100 through
	// a forwarder (iproxy). Required for iPhones.
	WDAURL string `yaml:"wda_url" json:"wda_url,omitempty"`
	// Tags are labels a job's device selector can match.
	Tags []string `yaml:"tags" json:"tags,omitempty"`
	// Simulated offers an in-process simulated phone under this serial
	// instead of a real one, for labs and tests: it renders screens,
	// records, and needs no adb.
	Simulated bool `yaml:"simulated" json:"simulated,omitempty"`
	// IME gives a simulated phone the input method that types text beyond
	// ASCII (docs/capture.md, Text beyond ASCII); without it, a job with
	// such text is refused, as on a real phone without ADBKeyboard. Only
	// for simulated phones: a real phone's input method is found on it.
	IME bool `yaml:"ime" json:"ime,omitempty"`
}

// ID is the phone's serial: an Android phone's adb serial, an iPhone's UDID.
func (d Device) ID() string {
	if d.Platform == protocol.PlatformIOS {
		return d.UDID
	}
	return d.Serial
}

// IOSDevices returns the iPhones the config lists.
func (a *Agent) IOSDevices() []Device {
	var out []Device
	for _, d := range a.Devices {
		if d.Platform == protocol.PlatformIOS {
			out = append(out, d)
		}
	}
	return out
}

// ADBDevices returns the Android phones the config lists that are not
// simulated: the ones the adb server must find.
func (a *Agent) ADBDevices() []Device {
	var out []Device
	for _, d := range a.Devices {
		if d.Platform != protocol.PlatformIOS && !d.Simulated {
			out = append(out, d)
		}
	}
	return out
}

// NeedsADB reports whether the agent drives phones through adb: when the
// config lists none at all (every phone the adb server reports), or lists
// an Android phone that is not simulated.
func (a *Agent) NeedsADB() bool {
	return len(a.Devices) == 0 || len(a.ADBDevices()) > 0
}

// checkWDAURL checks an iPhone's WebDriverAgent URL: http or https, with a
// host, and nothing after the path.
func checkWDAURL(ps *Problems, path, raw string) {
	if raw == "" {
		ps.add(path, "required: WebDriverAgent's URL on the iPhone, such as http://192.168.1.23:8100")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		ps.add(path, "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		ps.add(path, "must be an http:// or https:// URL, got %q", raw)
	case u.Host == "":
		ps.add(path, "has no host: %q", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		ps.add(path, "must not carry user info, a query or a fragment")
	}
}

// SimulatedDevices returns the devices marked simulated.
func (a *Agent) SimulatedDevices() []Device {
	var out []Device
	for _, d := range a.Devices {
		if d.Simulated {
			out = append(out, d)
		}
	}
	return out
}

// Status configures the local status endpoint.
type Status struct {
	// Listen is the endpoint's host:port; it must be a loopback address.
	// Default 127.0.0.1:7070.
	Listen string `yaml:"listen" json:"listen"`
}

// Sleep configures the OS sleep inhibitor (docs/operations.md, "Sleep").
type Sleep struct {
	// Inhibit holds the OS's sleep inhibitor while a job runs
	// (systemd-logind locks on Linux, SetThreadExecutionState on Windows)
	// and hands the running jobs back when the PC sleeps anyway. Default
	// true.
	Inhibit bool `yaml:"inhibit" json:"inhibit"`
}

// AgentUpdate configures the agent's signed self-updates (docs/updates.md).
type AgentUpdate struct {
	// Auto: the agent updates when the coordinator tells it to. False
	// refuses every update (reported as opted_out). Default true.
	Auto bool `yaml:"auto" json:"auto"`
	// PublicKey is the release public key (edgeagent-release-ed25519-pub:
	// followed by base64) whose signature a release must carry. Without
	// it the agent refuses every update.
	PublicKey string `yaml:"public_key" json:"public_key,omitempty"`
	// DrainTimeout bounds how long the agent waits for its running jobs
	// to end before it hands them back and updates. Default 10m.
	DrainTimeout Duration `yaml:"drain_timeout" json:"drain_timeout"`
	// HealthTimeout is how long a new binary has to get its hello
	// accepted by the coordinator before it puts the previous binary
	// back. Default 2m.
	HealthTimeout Duration `yaml:"health_timeout" json:"health_timeout"`
}

func (u AgentUpdate) validate(ps *Problems, path string) {
	if u.PublicKey != "" {
		if _, err := protocol.ParseReleaseKey(u.PublicKey); err != nil {
			ps.add(path+".public_key", "%v", err)
		}
	}
	positive(ps, path+".drain_timeout", u.DrainTimeout)
	positive(ps, path+".health_timeout", u.HealthTimeout)
}

// DefaultAgent returns the agent configuration with every default filled in.
// AgentID and NATS.URL have no default. The storage defaults to direct mode,
// whose endpoint, bucket and credentials must be set.
func DefaultAgent() *Agent {
	return &Agent{
		StateDir: defaultStateDir,
		Log:      defaultLog(),
		NATS:     defaultNATS(),
		Lease:    AgentLease{SafetyMargin: Duration(2 * time.Second)},
		Jobs:     Jobs{Concurrency: 1, ShutdownTimeout: Duration(30 * time.Second)},
		Storage: AgentStorage{
			Mode:        StorageDirect,
			S3:          S3{Secure: true},
			PartSize:    16 * MiB,
			Parallelism: 4,
		},
		ADB:    ADB{Address: "127.0.0.1:5037", Path: "adb"},
		Phones: defaultPhones(),
		Status: Status{Listen: "127.0.0.1:7070"},
		Sleep:  Sleep{Inhibit: true},
		Update: AgentUpdate{Auto: true, DrainTimeout: Duration(10 * time.Minute), HealthTimeout: Duration(2 * time.Minute)},
	}
}

// Warnings returns advice about the configuration that does not stop the
// agent, such as a config file holding a secret that other users can read.
// Only the loaders produce warnings.
func (a *Agent) Warnings() []string { return a.warnings }

// Validate checks every rule and returns all violations as [Problems] with
// their field paths, or nil. It also checks that the files the
// configuration names exist.
func (a *Agent) Validate() error {
	var ps Problems
	validID(&ps, "agent_id", a.AgentID)
	switch {
	case a.StateDir == "":
		ps.add("state_dir", "required")
	case !filepath.IsAbs(a.StateDir):
		ps.add("state_dir", "%q: must be an absolute path", a.StateDir)
	}
	a.Log.validate(&ps, "log")
	a.NATS.validate(&ps, "nats")
	positive(&ps, "lease.safety_margin", a.Lease.SafetyMargin)
	if a.Jobs.Concurrency < 1 {
		ps.add("jobs.concurrency", "must be at least 1, got %d", a.Jobs.Concurrency)
	}
	nonNegative(&ps, "jobs.shutdown_timeout", a.Jobs.ShutdownTimeout)
	a.Storage.validate(&ps, "storage")
	checkHostPort(&ps, "adb.address", a.ADB.Address)
	if a.ADB.Path == "" {
		ps.add("adb.path", "required")
	}
	a.ADB.validateServer(&ps, "adb")
	seen := map[string]int{}
	for i, d := range a.Devices {
		path := "devices[" + strconv.Itoa(i) + "]"
		key, id := ".serial", d.Serial
		switch d.Platform {
		case "", protocol.PlatformAndroid:
			if d.UDID != "" {
				ps.add(path+".udid", "only for iPhones (platform: ios); an Android phone is named by its serial")
			}
			if d.WDAURL != "" {
				ps.add(path+".wda_url", "only for iPhones (platform: ios)")
			}
		case protocol.PlatformIOS:
			key, id = ".udid", d.UDID
			if d.Serial != "" {
				ps.add(path+".serial", "not for iPhones: an iPhone is named by its udid")
			}
			if d.Simulated {
				ps.add(path+".simulated", "simulated phones are Android phones; remove platform or simulated")
			}
			checkWDAURL(&ps, path+".wda_url", d.WDAURL)
		default:
			ps.add(path+".platform", "must be android or ios, got %q", d.Platform)
		}
		switch first, dup := seen[id]; {
		case id == "":
			ps.add(path+key, "required")
		case dup:
			ps.add(path+key, "%q is already listed as devices[%d]", id, first)
		default:
			seen[id] = i
		}
		if d.IME && !d.Simulated {
			ps.add(path+".ime", "only for simulated phones: whether a real phone has the input method is asked of the phone")
		}
		for j, tag := range d.Tags {
			if tag == "" {
				ps.add(path+".tags["+strconv.Itoa(j)+"]", "must not be empty")
			}
		}
	}
	a.Phones.validate(&ps, "phones")
	checkLoopback(&ps, "status.listen", a.Status.Listen)
	a.Update.validate(&ps, "update")
	return ps.Err()
}

func (s AgentStorage) validate(ps *Problems, path string) {
	switch s.Mode {
	case StorageDirect:
		s.S3.validate(ps, path, true)
	case StoragePresigned:
		s.S3.validate(ps, path, false)
		// The point of presigned mode is an agent without storage
		// credentials: refuse them rather than hold them unused.
		for _, c := range []struct {
			key string
			set bool
		}{{"access_key", s.AccessKey != ""}, {"secret_key", s.SecretKey.IsSet()}, {"secret_key_file", s.SecretKeyFile != ""}} {
			if c.set {
				ps.add(path+"."+c.key, "not used in presigned mode, where the agent holds no storage credentials; remove it")
			}
		}
	default:
		ps.add(path+".mode", "must be direct or presigned, got %q", s.Mode)
	}
	if s.PartSize < MinPartSize || s.PartSize > MaxPartSize {
		ps.add(path+".part_size", "must be between %s and %s, got %s", MinPartSize, MaxPartSize, s.PartSize)
	}
	if s.Parallelism < 1 {
		ps.add(path+".parallelism", "must be at least 1, got %d", s.Parallelism)
	}
	if s.BandwidthLimit < 0 {
		ps.add(path+".bandwidth_limit", "must not be negative")
	}
}

// unusedWarnings names settings that are valid but have no effect: the
// bucket settings and the multipart tuning in presigned mode, where the
// coordinator chooses the bucket and every artifact is one presigned PUT.
func (a *Agent) unusedWarnings() []string {
	s := a.Storage
	if s.Mode != StoragePresigned {
		return nil
	}
	def := DefaultAgent().Storage
	var out []string
	for _, c := range []struct {
		key string
		set bool
	}{
		{"endpoint", s.Endpoint != ""}, {"bucket", s.Bucket != ""}, {"region", s.Region != ""},
		{"part_size", s.PartSize != def.PartSize}, {"parallelism", s.Parallelism != def.Parallelism},
	} {
		if c.set {
			out = append(out, "storage."+c.key+": has no effect in presigned mode (the coordinator presigns every upload as one PUT to its own bucket)")
		}
	}
	return out
}

// resolvePaths makes the relative file names in a relative to dir.
func (a *Agent) resolvePaths(dir string) {
	a.NATS.resolvePaths(dir)
	resolvePath(dir, &a.Storage.SecretKeyFile)
	resolvePath(dir, &a.ADB.KeysDir)
}

// readSecrets reads the secrets named by *_file fields.
func (a *Agent) readSecrets(ps *Problems, warnings *[]string) {
	a.NATS.readSecrets(ps, warnings, "nats")
	readSecretFile(ps, warnings, "storage.secret_key_file", &a.Storage.SecretKeyFile, &a.Storage.SecretKey)
}
