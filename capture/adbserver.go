package capture

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture/adb"
)

// ADBServerOptions configures the agent's own adb server
// (docs/operations.md, The agent's own adb server).
type ADBServerOptions struct {
	// Port is the server's port on 127.0.0.1. Required.
	Port int
	// ADBPath is the adb binary; default "adb" from PATH.
	ADBPath string
	// KeysDir, when set, is given to the server as ADB_VENDOR_KEYS.
	KeysDir string
	// CheckInterval is the wait before following the server's device
	// list again, and the first wait after a failed start; default 1s.
	CheckInterval time.Duration
	// Log receives starts, deaths and restarts.
	Log zerolog.Logger
	// OnRestart, when set, is called after every restart of a server that
	// died.
	OnRestart func()
}

// ADBServer is an adb server the agent started on a port of its own and
// supervises: when it dies (another `adb -P PORT kill-server`, a crash) it
// is started again and the network phones it had (`adb connect`) are
// connected again. Another adb using the default port cannot kill it.
type ADBServer struct {
	opts   ADBServerOptions
	c      *adb.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	network  []string // network phones seen, connected again after a restart
	restarts int
}

// StartADBServer starts the server (`adb -P PORT start-server`, a no-op
// when one already answers there) and its supervision, which ends with
// Close. The server itself is left running on Close, so that a restarted
// agent finds its phones still connected.
func StartADBServer(ctx context.Context, opts ADBServerOptions) (*ADBServer, error) {
	if opts.Port <= 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("start own adb server: port %d is not 1-65535", opts.Port)
	}
	if opts.ADBPath == "" {
		opts.ADBPath = "adb"
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = time.Second
	}
	s := &ADBServer{opts: opts, c: adb.New(adb.Options{Addr: "127.0.0.1:" + strconv.Itoa(opts.Port), NoStart: true, DialTimeout: 2 * time.Second})}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	v, err := s.c.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("start own adb server on port %d: %w", opts.Port, err)
	}
	opts.Log.Info().Int("port", opts.Port).Int("adb_version", v).Bool("keys_dir", opts.KeysDir != "").Msg("own adb server running")
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Go(func() { s.supervise(sctx) })
	return s, nil
}

// Addr is the server's host:port.
func (s *ADBServer) Addr() string { return s.c.Addr() }

// Restarts returns how many times the server was started again after it
// died.
func (s *ADBServer) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Close ends the supervision; the server keeps running.
func (s *ADBServer) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// Env is the environment the server is started with: ADB_VENDOR_KEYS set
// to KeysDir when given.
func (s *ADBServer) Env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "ANDROID_ADB_SERVER_PORT=") || (s.opts.KeysDir != "" && strings.HasPrefix(kv, "ADB_VENDOR_KEYS="))
	})
	if s.opts.KeysDir != "" {
		env = append(env, "ADB_VENDOR_KEYS="+s.opts.KeysDir)
	}
	return env
}

func (s *ADBServer) start(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(sctx, s.opts.ADBPath, "-P", strconv.Itoa(s.opts.Port), "start-server")
	cmd.Env = s.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("start own adb server with %s -P %d start-server: %w: %s", s.opts.ADBPath, s.opts.Port, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// supervise follows the server's device list (host:track-devices),
// which ends the moment the server dies; it then starts the server again
// and connects the network phones it had.
func (s *ADBServer) supervise(ctx context.Context) {
	backoff := s.opts.CheckInterval
	for {
		err := s.c.TrackDevices(ctx, s.remember)
		if ctx.Err() != nil {
			return
		}
		// The list may end without the server dying: ask it.
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, verr := s.c.Version(qctx)
		cancel()
		if verr == nil {
			if sleepCtx(ctx, backoff) != nil {
				return
			}
			continue
		}
		s.opts.Log.Warn().Err(err).Int("port", s.opts.Port).Msg("own adb server does not answer; starting it again")
		if err := s.start(ctx); err != nil {
			s.opts.Log.Error().Err(err).Int("port", s.opts.Port).Msg("start own adb server")
			if sleepCtx(ctx, backoff) != nil {
				return
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = s.opts.CheckInterval
		s.mu.Lock()
		s.restarts++
		network := slices.Clone(s.network)
		s.mu.Unlock()
		for _, addr := range network {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			msg, err := s.c.Connect(cctx, addr)
			cancel()
			if err != nil {
				s.opts.Log.Warn().Err(err).Str("serial", addr).Msg("connect network phone to the restarted adb server")
				continue
			}
			s.opts.Log.Info().Str("serial", addr).Str("adb", msg).Msg("network phone connected to the restarted adb server")
		}
		s.opts.Log.Warn().Int("port", s.opts.Port).Int("network_phones", len(network)).Msg("own adb server restarted")
		if s.opts.OnRestart != nil {
			s.opts.OnRestart()
		}
	}
}

// remember keeps the network phones the server lists.
func (s *ADBServer) remember(ds []adb.DeviceEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ds {
		if networkSerial(e.Serial) && !slices.Contains(s.network, e.Serial) {
			s.network = append(s.network, e.Serial)
		}
	}
}
