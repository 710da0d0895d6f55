package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Log configures the root logger.
type Log struct {
	// Level is the minimum level logged: trace, debug, info, warn or error.
	// Default info.
	Level string `yaml:"level" json:"level"`
	// Format is json (one JSON object per line, for services) or console
	// (human-readable). Default json.
	Format string `yaml:"format" json:"format"`
}

// Log levels and formats.
const (
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

var logLevels = []string{"trace", "debug", "info", "warn", "error"}

func defaultLog() Log { return Log{Level: "info", Format: LogFormatJSON} }

func (l Log) validate(ps *Problems, path string) {
	if !oneOf(l.Level, logLevels...) {
		ps.add(path+".level", "must be one of %s, got %q", strings.Join(logLevels, ", "), l.Level)
	}
	if !oneOf(l.Format, LogFormatJSON, LogFormatConsole) {
		ps.add(path+".format", "must be json or console, got %q", l.Format)
	}
}

// NATS configures the connection to the NATS servers. At most one way of
// authenticating may be configured: a creds file, an nkey seed file, a user
// and password, or a token.
type NATS struct {
	// URL is the server URL, or several separated by commas, each with a
	// nats://, tls://, ws:// or wss:// scheme. Required. It must not hold
	// credentials; use the fields below.
	URL string `yaml:"url" json:"url"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	CredsFile string `yaml:"creds_file" json:"creds_file,omitempty"`
	// NKeyFile is a file holding an nkey seed.
	NKeyFile string `yaml:"nkey_file" json:"nkey_file,omitempty"`
	// User and Password authenticate with a user name and password.
	User     string `yaml:"user" json:"user,omitempty"`
	Password Secret `yaml:"password" json:"password,omitempty"`
	// PasswordFile is a file holding the password, instead of Password. The
	// loaders read it into Password and clear PasswordFile.
	PasswordFile string `yaml:"password_file" json:"password_file,omitempty"`
	// Token authenticates with a token.
	Token Secret `yaml:"token" json:"token,omitempty"`
	// TokenFile is a file holding the token, instead of Token. The loaders
	// read it into Token and clear TokenFile.
	TokenFile string `yaml:"token_file" json:"token_file,omitempty"`
	// TLS configures a custom CA and a client certificate.
	TLS TLS `yaml:"tls" json:"tls"`
	// ReconnectWait is the pause between reconnection attempts. Default 2s.
	ReconnectWait Duration `yaml:"reconnect_wait" json:"reconnect_wait"`
	// RequestTimeout bounds each request to the other side. Default 5s.
	RequestTimeout Duration `yaml:"request_timeout" json:"request_timeout"`
}

// Servers returns the server URLs listed in URL.
func (n NATS) Servers() []string {
	var out []string
	for _, s := range strings.Split(n.URL, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func defaultNATS() NATS {
	return NATS{ReconnectWait: Duration(2 * time.Second), RequestTimeout: Duration(5 * time.Second)}
}

var natsSchemes = []string{"nats", "tls", "ws", "wss"}

func (n NATS) validate(ps *Problems, path string) {
	n.validateURL(ps, path+".url")
	n.validateAuth(ps, path)
}

// validateURL checks URL, reporting problems at urlPath.
func (n NATS) validateURL(ps *Problems, urlPath string) {
	path := strings.TrimSuffix(urlPath, ".url")
	switch servers := n.Servers(); {
	case strings.TrimSpace(n.URL) == "":
		ps.add(urlPath, "required")
	default:
		if len(servers) != len(strings.Split(n.URL, ",")) {
			ps.add(urlPath, "empty entry in comma-separated list")
		}
		for _, s := range servers {
			u, err := url.Parse(s)
			if err != nil {
				// The parse error quotes the URL, which may hold a password.
				ps.add(urlPath, "invalid URL")
				continue
			}
			if u.User != nil {
				ps.add(urlPath, "%s: must not contain credentials; use %s.user and %s.password or a creds file", u.Redacted(), path, path)
				continue
			}
			if !oneOf(u.Scheme, natsSchemes...) || u.Host == "" {
				ps.add(urlPath, "%q: want scheme://host:port with scheme nats, tls, ws or wss", s)
			}
		}
	}
}

// validateAuth checks that at most one way of authenticating is set.
func (n NATS) validateAuth(ps *Problems, path string) {
	var methods []string
	if n.CredsFile != "" {
		methods = append(methods, "creds_file")
	}
	if n.NKeyFile != "" {
		methods = append(methods, "nkey_file")
	}
	if n.User != "" || n.Password.IsSet() || n.PasswordFile != "" {
		methods = append(methods, "user")
	}
	if n.Token.IsSet() || n.TokenFile != "" {
		methods = append(methods, "token")
	}
	for _, m := range methods[min(1, len(methods)):] {
		ps.add(path+"."+m, "conflicts with %s.%s; configure one authentication method", path, methods[0])
	}
	if n.Password.IsSet() && n.PasswordFile != "" {
		ps.add(path+".password_file", "conflicts with %s.password; set one of them", path)
	}
	if n.Token.IsSet() && n.TokenFile != "" {
		ps.add(path+".token_file", "conflicts with %s.token; set one of them", path)
	}
	if n.User != "" && !n.Password.IsSet() && n.PasswordFile == "" {
		ps.add(path+".password", "required with %s.user (or set %s.password_file)", path, path)
	}
	if n.User == "" {
		if n.Password.IsSet() {
			ps.add(path+".password", "needs %s.user", path)
		}
		if n.PasswordFile != "" {
			ps.add(path+".password_file", "needs %s.user", path)
		}
	}
	checkFile(ps, path+".creds_file", n.CredsFile)
	checkFile(ps, path+".nkey_file", n.NKeyFile)
	checkFile(ps, path+".password_file", n.PasswordFile)
	checkFile(ps, path+".token_file", n.TokenFile)
	n.TLS.validate(ps, path+".tls")
	positive(ps, path+".reconnect_wait", n.ReconnectWait)
	positive(ps, path+".request_timeout", n.RequestTimeout)
}

// resolvePaths makes the relative file names in n relative to dir.
func (n *NATS) resolvePaths(dir string) {
	for _, p := range []*string{&n.CredsFile, &n.NKeyFile, &n.PasswordFile, &n.TokenFile, &n.TLS.CAFile, &n.TLS.CertFile, &n.TLS.KeyFile} {
		resolvePath(dir, p)
	}
}

// readSecrets reads the password and token files into Password and Token.
func (n *NATS) readSecrets(ps *Problems, warnings *[]string, path string) {
	readSecretFile(ps, warnings, path+".password_file", &n.PasswordFile, &n.Password)
	readSecretFile(ps, warnings, path+".token_file", &n.TokenFile, &n.Token)
}

// TLS configures TLS to a server beyond the system's defaults.
type TLS struct {
	// CAFile is a PEM bundle of the CAs to trust instead of the system roots.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and its key; set
	// both or neither.
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`
}

// Enabled reports whether any TLS setting is present.
func (t TLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

func (t TLS) validate(ps *Problems, path string) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		if t.CertFile == "" {
			ps.add(path+".cert_file", "required with %s.key_file", path)
		} else {
			ps.add(path+".key_file", "required with %s.cert_file", path)
		}
	}
	checkFile(ps, path+".ca_file", t.CAFile)
	checkFile(ps, path+".cert_file", t.CertFile)
	checkFile(ps, path+".key_file", t.KeyFile)
}

// S3 locates an S3-compatible bucket (MinIO, AWS S3) and the credentials for
// it.
type S3 struct {
	// Endpoint is host[:port] without a scheme, for example
	// "minio.example.com:9000"; Secure chooses https.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Secure selects https. Default true.
	Secure bool `yaml:"secure" json:"secure"`
	// Region is the bucket's region. Empty: the coordinator's presigner
	// asks the server; the agent's direct-mode uploader signs for us-east-1
	// (right for MinIO), so an AWS bucket elsewhere needs it set.
	Region string `yaml:"region" json:"region,omitempty"`
	// Bucket is the bucket name.
	Bucket string `yaml:"bucket" json:"bucket,omitempty"`
	// AccessKey is the access key id.
	AccessKey string `yaml:"access_key" json:"access_key,omitempty"`
	// SecretKey is the secret access key.
	SecretKey Secret `yaml:"secret_key" json:"secret_key,omitempty"`
	// SecretKeyFile is a file holding the secret key, instead of SecretKey.
	// The loaders read it into SecretKey and clear SecretKeyFile.
	SecretKeyFile string `yaml:"secret_key_file" json:"secret_key_file,omitempty"`
}

// configured reports whether any location or credential is set.
func (s S3) configured() bool {
	return s.Endpoint != "" || s.Region != "" || s.Bucket != "" || s.AccessKey != "" || s.SecretKey.IsSet() || s.SecretKeyFile != ""
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// validate checks the fields that are set; with required, it also demands
// the endpoint, bucket and credentials.
func (s S3) validate(ps *Problems, path string, required bool) {
	if s.Endpoint == "" {
		if required {
			ps.add(path+".endpoint", "required")
		}
	} else if strings.Contains(s.Endpoint, "://") {
		ps.add(path+".endpoint", "%q: want host[:port] without a scheme; %s.secure selects https", s.Endpoint, path)
	} else if strings.ContainsAny(s.Endpoint, "/?#@ ") {
		ps.add(path+".endpoint", "%q: want host[:port] only", s.Endpoint)
	}
	if s.Bucket == "" {
		if required {
			ps.add(path+".bucket", "required")
		}
	} else if !bucketName.MatchString(s.Bucket) || strings.Contains(s.Bucket, "..") {
		ps.add(path+".bucket", "%q is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens)", s.Bucket)
	}
	if s.AccessKey == "" && required {
		ps.add(path+".access_key", "required")
	}
	switch {
	case s.SecretKey.IsSet() && s.SecretKeyFile != "":
		ps.add(path+".secret_key_file", "conflicts with %s.secret_key; set one of them", path)
	case !s.SecretKey.IsSet() && s.SecretKeyFile == "" && required:
		ps.add(path+".secret_key", "required (or set %s.secret_key_file)", path)
	}
	checkFile(ps, path+".secret_key_file", s.SecretKeyFile)
}

// idPattern is the form of agent and coordinator ids: it keeps them usable
// as one token of a NATS subject.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func validID(ps *Problems, path, id string) {
	switch {
	case id == "":
		ps.add(path, "required")
	case !idPattern.MatchString(id):
		ps.add(path, "%q: want 1-64 characters from A-Z, a-z, 0-9, _ and -", id)
	}
}

// checkFile reports a named file that does not exist or is not a regular
// file. An empty name is not checked.
func checkFile(ps *Problems, path, name string) {
	if name == "" {
		return
	}
	fi, err := os.Stat(name)
	switch {
	case os.IsNotExist(err):
		ps.add(path, "file %s does not exist", name)
	case err != nil:
		ps.add(path, "cannot access %s: %v", name, unwrapPathError(err))
	case !fi.Mode().IsRegular():
		ps.add(path, "%s is not a regular file", name)
	}
}

// unwrapPathError drops the operation and path that an *os.PathError
// repeats.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// checkHostPort reports an address that is not host:port with a valid port
// and returns its host.
func checkHostPort(ps *Problems, path, addr string) (string, bool) {
	if addr == "" {
		ps.add(path, "required")
		return "", false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		ps.add(path, "%q: want host:port", addr)
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		ps.add(path, "%q: invalid port %q", addr, port)
		return "", false
	}
	return host, true
}

// checkLoopback reports an address that is not host:port on a loopback
// interface.
func checkLoopback(ps *Problems, path, addr string) {
	host, ok := checkHostPort(ps, path, addr)
	if !ok {
		return
	}
	if strings.EqualFold(host, "localhost") {
		return
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		ps.add(path, "%q: must be a loopback address such as 127.0.0.1:7070 or [::1]:7070", addr)
	}
}

func positive(ps *Problems, path string, d Duration) {
	if d <= 0 {
		ps.add(path, "must be positive, got %s", d)
	}
}

func nonNegative(ps *Problems, path string, d Duration) {
	if d < 0 {
		ps.add(path, "must not be negative, got %s", d)
	}
}

func oneOf(s string, choices ...string) bool { return slices.Contains(choices, s) }

// resolvePath makes a relative file name relative to dir. An empty name
// stays empty.
func resolvePath(dir string, name *string) {
	if *name != "" && !filepath.IsAbs(*name) {
		*name = filepath.Join(dir, *name)
	}
}

// readSecretFile reads a secret from name into dst and clears name. A single
// trailing line break is removed. A file other users can read is warned
// about.
func readSecretFile(ps *Problems, warnings *[]string, path string, name *string, dst *Secret) {
	if *name == "" {
		return
	}
	if mode, ok := readableByOthers(*name); ok {
		*warnings = append(*warnings, fmt.Sprintf("%s: %s is readable by group or others (mode %04o); restrict it (chmod 600)", path, *name, mode.Perm()))
	}
	data, err := os.ReadFile(*name)
	if err != nil {
		ps.add(path, "read %s: %v", *name, unwrapPathError(err))
		return
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if s == "" {
		ps.add(path, "%s is empty", *name)
		return
	}
	*dst = Secret(s)
	*name = ""
}
