package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/uploader"
)

// doctorCommand checks the setup and says how to fix what is broken.
type doctorCommand struct {
	app        *app
	configPath string
	timeout    time.Duration
}

func (c *doctorCommand) name() string { return "doctor" }
func (c *doctorCommand) summary() string {
	return "check config, NATS, coordinator, storage, adb, phones, iPhones, clock and disk, with a fix for each problem"
}

func (c *doctorCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.configPath, "c", config.DefaultAgentFile, "check the setup described by `file`")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "time allowed to each network check")
	return fs
}

// Check results.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "FAIL"
	checkSkip = "skip"
)

type checkResult struct {
	name   string
	status string
	detail string
	fix    string
}

type doctor struct {
	cfg     *config.Agent
	timeout time.Duration
	results []checkResult

	agentPID     int
	agentRunning bool
	nc           *nats.Conn
	adbServer    string // version of the reachable adb server, "" when not reachable
}

func (d *doctor) add(name, status, detail, fix string) {
	d.results = append(d.results, checkResult{name: name, status: status, detail: detail, fix: fix})
}

func (c *doctorCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	w := c.app.stdout
	fmt.Fprintf(w, "edgeagent doctor: %s\n\n", c.configPath)
	cfg, err := config.LoadAgent(c.configPath)
	d := &doctor{cfg: cfg, timeout: c.timeout}
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			var lines []string
			for _, p := range ps {
				lines = append(lines, p.String())
			}
			d.add("config", checkFail, fmt.Sprintf("%d problem(s):\n%s", len(ps), strings.Join(lines, "\n")),
				"correct the listed keys (examples/agent.yaml documents every option), then run edgeagent config validate -c "+c.configPath)
		} else {
			d.add("config", checkFail, err.Error(), "point -c at the agent's config file (default "+config.DefaultAgentFile+")")
		}
		d.print(w)
		return &exitError{exitFailure}
	}
	detail := "valid"
	if ws := cfg.Warnings(); len(ws) > 0 {
		d.add("config", checkWarn, strings.Join(ws, "\n"), "restrict the file's permissions (chmod 600) or move secrets to ${ENV} or *_file options")
	} else {
		d.add("config", checkOK, detail, "")
	}
	d.checkStateDir()
	d.checkNATS()
	if d.nc != nil {
		d.checkCoordinator(ctx)
		d.nc.Close()
	}
	d.checkStorage(ctx)
	d.checkADB(ctx)
	d.checkPhones(ctx)
	d.checkIPhones(ctx)
	d.checkDisk()
	d.checkStatusEndpoint(ctx)
	failed := d.print(w)
	if failed > 0 {
		return &exitError{exitFailure}
	}
	return nil
}

// print writes the checklist and returns how many checks failed.
func (d *doctor) print(w io.Writer) int {
	failed, warned := 0, 0
	for _, r := range d.results {
		lines := strings.Split(r.detail, "\n")
		fmt.Fprintf(w, "[%-4s] %-20s %s\n", r.status, r.name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "       %-20s %s\n", "", l)
		}
		if r.fix != "" && r.status != checkOK {
			fmt.Fprintf(w, "       %-20s fix: %s\n", "", r.fix)
		}
		switch r.status {
		case checkFail:
			failed++
		case checkWarn:
			warned++
		}
	}
	fmt.Fprintln(w)
	switch {
	case failed > 0:
		fmt.Fprintf(w, "%d check(s) failed, %d warning(s).\n", failed, warned)
	case warned > 0:
		fmt.Fprintf(w, "All checks passed, %d warning(s).\n", warned)
	default:
		fmt.Fprintln(w, "All checks passed.")
	}
	return failed
}

func (d *doctor) checkStateDir() {
	dir := d.cfg.StateDir
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := nearestDir(dir)
		if err := writable(parent); err != nil {
			d.add("state directory", checkFail, fmt.Sprintf("%s does not exist and cannot be created: %v", dir, err),
				fmt.Sprintf("create it for the agent's user: mkdir -p %s && chmod 700 %s (and chown it to that user)", dir, dir))
			return
		}
		d.add("state directory", checkOK, dir+" does not exist yet; the agent creates it (mode 0700)", "")
		return
	case err != nil:
		d.add("state directory", checkFail, err.Error(), "make "+dir+" accessible to the agent's user")
		return
	case !fi.IsDir():
		d.add("state directory", checkFail, dir+" is not a directory", "set state_dir to a directory")
		return
	}
	if err := writable(dir); err != nil {
		d.add("state directory", checkFail, fmt.Sprintf("%s is not writable: %v", dir, err), "chown "+dir+" to the agent's user and chmod 700 it")
		return
	}
	pid, held, err := agent.HolderPID(dir)
	d.agentPID, d.agentRunning = pid, held
	status, detail := checkOK, dir+" writable"
	if held {
		detail += fmt.Sprintf("; an agent runs on it (pid %d)", pid)
	} else if err == nil {
		detail += "; no agent runs on it"
	}
	fix := ""
	if fi.Mode().Perm()&0o077 != 0 {
		status = checkWarn
		detail += fmt.Sprintf("; mode %04o lets other users in", fi.Mode().Perm())
		fix = "chmod 700 " + dir
	}
	d.add("state directory", status, detail, fix)
}

// nearestDir returns dir or its closest existing ancestor.
func nearestDir(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}

func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".edgeagent-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func (d *doctor) checkNATS() {
	servers := strings.Join(d.cfg.NATS.Servers(), ", ")
	nc, err := natsconn.Connect(d.cfg.NATS, natsconn.Options{
		Name: "edgeagent doctor " + d.cfg.AgentID, InboxPrefix: protocol.InboxPrefix(d.cfg.AgentID),
		Log: zerolog.Nop(), NoReconnectBuffer: true,
	})
	if err != nil {
		d.add("nats", checkFail, err.Error(), "check nats.creds_file, nats.nkey_file and nats.tls in the config")
		return
	}
	deadline := time.Now().Add(d.timeout)
	// The connection's last error changes as it retries (an auth refusal
	// may be followed by a reconnect attempt that clears it): the error
	// seen is kept, a refusal of the credentials first of all.
	var seen error
	for !nc.IsConnected() && time.Now().Before(deadline) {
		if e := nc.LastError(); e != nil {
			seen = e
			if isAuthError(e) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !nc.IsConnected() {
		lerr := seen
		if e := nc.LastError(); e != nil && (lerr == nil || !isAuthError(lerr)) {
			lerr = e
		}
		nc.Close()
		switch {
		case lerr != nil && isAuthError(lerr):
			d.add("nats", checkFail, fmt.Sprintf("%s refused this agent's credentials: %v", servers, lerr),
				"check nats.user/password, token, nkey_file or creds_file against the account the coordinator's operator created for agent "+d.cfg.AgentID)
		case lerr != nil && strings.Contains(strings.ToLower(lerr.Error()), "tls"), lerr != nil && strings.Contains(strings.ToLower(lerr.Error()), "x509"):
			d.add("nats", checkFail, fmt.Sprintf("TLS to %s failed: %v", servers, lerr),
				"set nats.tls.ca_file to the CA that signed the server's certificate, and use a tls:// URL")
		default:
			why := "no answer within " + d.timeout.String()
			if lerr != nil {
				why = lerr.Error()
			} else if derr := dialServers(d.cfg.NATS.Servers(), d.timeout); derr != nil {
				why = derr.Error()
			}
			d.add("nats", checkFail, fmt.Sprintf("cannot connect to %s: %s", servers, why),
				"check nats.url, that the coordinator's NATS server runs, and that this PC can reach it (firewall, DNS)")
		}
		return
	}
	d.nc = nc
	d.add("nats", checkOK, "connected to "+nc.ConnectedUrlRedacted()+" and authenticated", "")
}

// dialServers opens a TCP connection to each server URL and returns the
// first failure, naming why NATS is not reachable.
func dialServers(servers []string, timeout time.Duration) error {
	for _, s := range servers {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			continue
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "4222")
		}
		c, err := net.DialTimeout("tcp", host, timeout)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

func isAuthError(err error) bool {
	s := strings.ToLower(err.Error())
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		strings.Contains(s, "authorization") || strings.Contains(s, "authentication")
}

// checkCoordinator asks the coordinator for its hello reply (clock
// offset). While an agent runs on the state directory, its own view (from
// the status endpoint) is used instead, so that the check never disturbs
// its session; otherwise a probe hello is sent.
func (d *doctor) checkCoordinator(ctx context.Context) {
	if d.agentRunning {
		st, _, err := fetchStatus(ctx, d.cfg.Status.Listen)
		if err != nil {
			d.add("coordinator", checkWarn, fmt.Sprintf("an agent runs (pid %d) but its status endpoint %s did not answer: %v", d.agentPID, d.cfg.Status.Listen, err),
				"check status.listen; run edgeagent status")
			return
		}
		if !st.Connection.HelloAccepted {
			for i := len(st.Errors) - 1; i >= 0; i-- {
				if e := st.Errors[i]; e.What == "hello" && (strings.Contains(e.Error, "upload_mode") || strings.Contains(e.Error, "storage mode mismatch")) {
					d.add("coordinator", checkFail, "the running agent's hello was refused: "+e.Error, modeMismatchFix)
					return
				}
			}
			d.add("coordinator", checkFail, "the running agent has no session with the coordinator", "see edgeagent status (last errors) and the coordinator's log")
			return
		}
		d.add("coordinator", checkOK, fmt.Sprintf("the running agent's session with %s is up", orDash(st.Connection.CoordinatorID)), "")
		d.clock(time.Duration(st.Connection.ClockOffsetMS)*time.Millisecond, "as measured by the running agent")
		return
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	hello := protocol.Hello{BootID: "doctor-" + hex.EncodeToString(b[:]), Version: version, Probe: true, Draining: true, UploadMode: d.cfg.Storage.Mode}
	var rep protocol.HelloReply
	rctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	sent := time.Now()
	err := natsrpc.Request(rctx, d.nc, protocol.CoordSubject(d.cfg.AgentID, protocol.VerbHello), hello, &rep)
	rtt := time.Since(sent)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		d.add("coordinator", checkFail, "no coordinator serves "+protocol.CoordSubject(d.cfg.AgentID, protocol.VerbHello),
			"start edgecoord, and check that this agent's NATS account may publish to edge.v1.coord."+d.cfg.AgentID+".>")
		return
	case errors.Is(err, protocol.ErrBadRequest) && strings.Contains(err.Error(), "upload_mode"):
		// The hello said this agent's storage mode and the coordinator
		// cannot serve it (docs/protocol.md section 5, hello).
		d.add("coordinator", checkFail, "the coordinator refuses this agent's storage mode ("+d.cfg.Storage.Mode+"): "+err.Error(), modeMismatchFix)
		return
	case errors.Is(err, protocol.ErrForbidden), errors.Is(err, protocol.ErrBadRequest):
		d.add("coordinator", checkFail, "the coordinator refuses this agent: "+err.Error(), "check agent_id against the coordinator's list of agents")
		return
	case err != nil:
		d.add("coordinator", checkFail, "hello failed: "+err.Error(),
			"check the coordinator's log; a NATS permissions error means the agent may not publish to edge.v1.coord."+d.cfg.AgentID+".> or subscribe to _INBOX."+d.cfg.AgentID+".>")
		return
	}
	if d.cfg.Storage.Mode == config.StoragePresigned && rep.UploadMode == protocol.UploadModeDirect {
		// A coordinator that does not check the hello's upload_mode.
		d.add("coordinator", checkFail, fmt.Sprintf("%s answered hello, but it does not presign (upload_mode direct) and this agent uploads in presigned mode: every upload would be refused", orDash(rep.CoordinatorID)), modeMismatchFix)
		return
	}
	d.add("coordinator", checkOK, fmt.Sprintf("%s answered hello in %s (lease ttl %s)", orDash(rep.CoordinatorID), roundDur(rtt), time.Duration(rep.LeaseTTLMS)*time.Millisecond), "")
	if rep.ServerTime.IsZero() {
		d.add("clock", checkSkip, "the coordinator sent no server_time", "")
		return
	}
	d.clock(rep.ServerTime.Sub(sent.Add(rtt/2)), fmt.Sprintf("±%s", roundDur(rtt/2)))
}

// modeMismatchFix is the fix of a storage mode the coordinator cannot serve.
const modeMismatchFix = "configure storage on the coordinator (storage: in edgecoord's config) so that it presigns uploads, or set storage.mode: direct with this agent's own storage credentials"

func (d *doctor) clock(offset time.Duration, how string) {
	detail := fmt.Sprintf("coordinator clock minus this PC's: %+dms (%s)", offset.Milliseconds(), how)
	abs := max(offset, -offset)
	switch {
	case abs >= 10*time.Second:
		d.add("clock", checkFail, detail, "turn on time synchronisation (timedatectl set-ntp true; on Windows: Settings > Time > Sync now); leases do not depend on it, but logs, TLS and storage signatures do")
	case abs >= time.Second:
		d.add("clock", checkWarn, detail, "turn on time synchronisation (timedatectl set-ntp true)")
	default:
		d.add("clock", checkOK, detail, "")
	}
}

func (d *doctor) checkStorage(ctx context.Context) {
	s := d.cfg.Storage
	if s.Mode != config.StorageDirect {
		d.add("storage", checkSkip, "presigned mode: the coordinator presigns every upload", "")
		return
	}
	scheme := "http"
	if s.Secure {
		scheme = "https"
	}
	where := fmt.Sprintf("bucket %s at %s://%s", s.Bucket, scheme, s.Endpoint)
	// The uploader the agent runs, built from the same settings: it signs
	// and checks as the agent's uploads do.
	up, err := uploader.NewS3(agent.S3Options(d.cfg, ""))
	if err != nil {
		d.add("storage", checkFail, where+": "+err.Error(), "check storage.endpoint")
		return
	}
	rctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if err := up.CheckBucket(rctx); err != nil {
		switch {
		case errors.Is(err, uploader.ErrNotFound):
			d.add("storage", checkFail, where+": the bucket does not exist", "create the bucket or correct storage.bucket")
		case uploader.IsCredentialsError(err):
			d.add("storage", checkFail, fmt.Sprintf("%s: credentials refused (%s)", where, uploader.ErrorCode(err)),
				"check storage.access_key and storage.secret_key (or secret_key_file)")
		default:
			d.add("storage", checkFail, fmt.Sprintf("%s: not reachable: %v", where, errors.Unwrap(err)),
				"check storage.endpoint and storage.secure, and that this PC can reach the storage server")
		}
		return
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	key := "doctor/" + d.cfg.AgentID + "/" + hex.EncodeToString(b[:])
	switch err := up.CheckWrite(rctx, key); {
	case errors.Is(err, uploader.ErrCheckLeftover):
		d.add("storage", checkWarn, fmt.Sprintf("%s: write works; removing the test object %s failed: %v", where, key, errors.Unwrap(err)),
			"allow s3:DeleteObject on doctor/"+d.cfg.AgentID+"/*, or remove doctor/ objects from time to time")
	case err != nil:
		d.add("storage", checkFail, fmt.Sprintf("%s reachable, but writing %s failed: %v", where, key, errors.Unwrap(err)),
			"allow this agent's key s3:PutObject on jobs/* and doctor/"+d.cfg.AgentID+"/* in the bucket policy")
	default:
		d.add("storage", checkOK, where+": reachable, conditional write (If-None-Match) and delete work", "")
	}
}

func (d *doctor) onlySimulated() bool {
	return !d.cfg.NeedsADB()
}

// adbClient is the client the agent's adb backend uses, for the configured
// server; doctor never starts the server.
func (d *doctor) adbClient() *adb.Client {
	return adb.New(adb.Options{Addr: d.cfg.ADB.ServerAddress(), ADBPath: d.cfg.ADB.Path, NoStart: true, DialTimeout: d.timeout})
}

func (d *doctor) checkADB(ctx context.Context) {
	if d.onlySimulated() {
		what := "only simulated phones are configured"
		if len(d.cfg.IOSDevices()) > 0 {
			what = "no Android phone is configured (iPhones are reached through WebDriverAgent)"
		}
		d.add("adb", checkSkip, what, "")
		return
	}
	binVersion := ""
	path, lerr := exec.LookPath(d.cfg.ADB.Path)
	if lerr == nil {
		cctx, cancel := context.WithTimeout(ctx, d.timeout)
		out, err := exec.CommandContext(cctx, path, "version").Output()
		cancel()
		if err == nil {
			binVersion = firstLine(string(out))
		}
	}
	c := d.adbClient()
	vctx, cancel := context.WithTimeout(ctx, d.timeout)
	ver, serr := c.Version(vctx)
	cancel()
	switch {
	case serr == nil:
		d.adbServer = strconv.Itoa(ver)
		detail := fmt.Sprintf("adb server at %s answers, protocol version %d", c.Addr(), ver)
		if binVersion != "" {
			detail += "; " + binVersion + " at " + path
		}
		d.add("adb", checkOK, detail, "")
	case lerr != nil:
		d.add("adb", checkFail, fmt.Sprintf("no adb server at %s (%v) and no adb binary %q to start one", c.Addr(), errors.Unwrap(serr), d.cfg.ADB.Path),
			"install adb (Debian: apt-get install adb; Windows: Android SDK platform-tools) or set adb.path")
	case binVersion == "":
		d.add("adb", checkFail, fmt.Sprintf("no adb server at %s, and %s does not run", c.Addr(), path),
			"reinstall adb, or set adb.path to a working binary")
	default:
		d.add("adb", checkOK, fmt.Sprintf("%s at %s; no server at %s yet (the agent starts one)", binVersion, path, c.Addr()), "")
	}
}

func (d *doctor) checkPhones(ctx context.Context) {
	for _, s := range d.cfg.SimulatedDevices() {
		d.add("phone "+s.Serial, checkOK, "simulated", "")
	}
	if d.onlySimulated() {
		return
	}
	if d.adbServer == "" {
		d.add("phones", checkSkip, "the adb server is not running, so no phone can be listed", "start it with: adb start-server")
		return
	}
	lctx, cancel := context.WithTimeout(ctx, d.timeout)
	devs, err := d.adbClient().DevicesLong(lctx)
	cancel()
	if err != nil {
		d.add("phones", checkFail, "list phones: "+err.Error(), "restart the adb server: adb kill-server && adb start-server")
		return
	}
	attached := map[string]bool{}
	for _, dev := range devs {
		attached[dev.Serial] = true
	}
	wanted := map[string]bool{}
	for _, c := range d.cfg.ADBDevices() {
		wanted[c.Serial] = true
		if !attached[c.Serial] {
			d.add("phone "+c.Serial, checkFail, "listed in devices but not attached",
				"plug it in (a data cable, not a charge-only one), unlock it, and check adb devices; or remove it from devices")
		}
	}
	if len(devs) == 0 && len(wanted) == 0 {
		d.add("phones", checkWarn, "no phone is attached", "plug in a phone with USB debugging on (Settings > Developer options)")
	}
	var states []string
	defer func() { d.checkOtherUserKeys(states) }()
	for _, dev := range devs {
		if len(wanted) > 0 && !wanted[dev.Serial] {
			d.add("phone "+dev.Serial, checkSkip, dev.State+"; not listed in devices, so not offered", "")
			continue
		}
		states = append(states, dev.State)
		name := "phone " + dev.Serial
		switch dev.State {
		case adb.StateDevice:
			d.add(name, checkOK, "ready"+modelSuffix(dev.Model), "")
		case adb.StateUnauthorized:
			d.add(name, checkFail, "unauthorized: the phone has not accepted this PC's adb key",
				"unlock the phone and accept \"Allow USB debugging?\" (tick \"Always allow from this computer\"); no prompt? Developer options > Revoke USB debugging authorisations, then replug")
		case adb.StateOffline:
			d.add(name, checkFail, "offline", "replug the cable or run: adb reconnect offline; reboot the phone if it stays offline")
		case adb.StateNoPermissions:
			d.add(name, checkFail, "no permissions: this user may not open the USB device",
				"install udev rules for Android (Debian: apt-get install android-sdk-platform-tools-common) and add the agent's user to plugdev, then replug")
		default:
			d.add(name, checkWarn, dev.State, "wait for the phone to finish booting or recovery; replug it")
		}
	}
}

// modelSuffix shows the model as the phone reports it (getprop
// ro.product.model): adb's device list writes its spaces as underscores.
func modelSuffix(m string) string {
	if m == "" {
		return ""
	}
	return " (" + strings.ReplaceAll(m, "_", " ") + ")"
}

// diskFreeOf is diskFree, replaced by tests that need a fixed answer.
var diskFreeOf = diskFree

func (d *doctor) checkDisk() {
	dir := nearestDir(d.cfg.StateDir)
	free, err := diskFreeOf(dir)
	if err != nil {
		d.add("spool disk", checkWarn, "cannot read free space of "+dir+": "+err.Error(), "")
		return
	}
	detail := fmt.Sprintf("%s free on the file system of %s", humanBytes(free), dir)
	switch {
	case free < 1<<30:
		d.add("spool disk", checkFail, detail, "free space there, or move state_dir to a larger disk: recordings are spooled there before upload")
	case free < 5<<30:
		d.add("spool disk", checkWarn, detail, "long screen recordings need several GiB; free space or move state_dir")
	default:
		d.add("spool disk", checkOK, detail, "")
	}
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (d *doctor) checkStatusEndpoint(ctx context.Context) {
	addr := d.cfg.Status.Listen
	if d.agentRunning {
		st, _, err := fetchStatus(ctx, addr)
		if err != nil {
			d.add("status endpoint", checkFail, fmt.Sprintf("the running agent does not answer on %s: %v", addr, err),
				"another program may hold the port, or the agent was started with another config")
			return
		}
		d.add("status endpoint", checkOK, fmt.Sprintf("%s answers: agent %s, %s, %d job(s)", addr, st.BootID, st.State, len(st.Jobs)), "")
		return
	}
	l, err := agent.ListenStatus(addr)
	if err != nil {
		d.add("status endpoint", checkFail, fmt.Sprintf("cannot listen on %s: %v", addr, err),
			"another program holds the port: choose a free loopback port in status.listen")
		return
	}
	l.Close()
	d.add("status endpoint", checkOK, addr+" is free for the agent", "")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
