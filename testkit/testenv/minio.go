package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOServer is a running MinIO server and a bucket of one test's own.
type MinIOServer struct {
	Endpoint  string // host:port, plain HTTP
	AccessKey string
	SecretKey string
	Bucket    string // created for this call, empty
}

// Client returns a minio-go client for the server.
func (m MinIOServer) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minioClient(m.Endpoint, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatalf("create minio client: %v", err)
	}
	return c
}

// Environment variables that point the tests at an existing MinIO server
// instead of starting one.
const (
	EnvMinIOEndpoint  = "EDGE_TEST_MINIO_ENDPOINT"
	EnvMinIOAccessKey = "EDGE_TEST_MINIO_ACCESS_KEY"
	EnvMinIOSecretKey = "EDGE_TEST_MINIO_SECRET_KEY"
)

// minioDirPrefix names the temp directories of started servers; the pid of
// the test binary follows, so directories of finished runs can be removed.
const minioDirPrefix = "edgeagent-minio-"

var minioShared struct {
	sync.Mutex
	started bool
	srv     MinIOServer // without bucket
	missing string      // why the binary could not be found
	err     error
}

var minioBuckets atomic.Int64

// MinIO returns the test binary's MinIO server with a fresh, empty bucket that
// is removed, with its objects, when the test ends. The server is started on
// the first call, from the minio binary on PATH, in $GOBIN or in
// $(go env GOPATH)/bin, on random loopback ports with its data in a temp
// directory; it lives until the test binary exits. EDGE_TEST_MINIO_ENDPOINT
// (with _ACCESS_KEY and _SECRET_KEY) selects an existing server instead. A
// missing binary skips the test, or fails it in CI.
func MinIO(t testing.TB) MinIOServer {
	t.Helper()
	minioShared.Lock()
	if !minioShared.started {
		minioShared.started = true
		minioShared.srv, minioShared.missing, minioShared.err = startMinIO()
	}
	srv, missing, err := minioShared.srv, minioShared.missing, minioShared.err
	minioShared.Unlock()
	if missing != "" {
		Missing(t, "%s", missing)
	}
	if err != nil {
		t.Fatalf("start minio: %v", err)
	}

	c, err := minioClient(srv.Endpoint, srv.AccessKey, srv.SecretKey)
	if err != nil {
		t.Fatalf("create minio client: %v", err)
	}
	srv.Bucket = fmt.Sprintf("test-%d-%s", minioBuckets.Add(1), minioRandHex(4))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, srv.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("create bucket %s: %v", srv.Bucket, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.RemoveBucketWithOptions(ctx, srv.Bucket, minio.RemoveBucketOptions{ForceDelete: true}); err != nil {
			t.Logf("remove bucket %s: %v", srv.Bucket, err)
		}
	})
	return srv
}

func minioClient(endpoint, accessKey, secretKey string) (*minio.Client, error) {
	return minio.New(endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(accessKey, secretKey, ""),
		Region: "us-east-1",
	})
}

// startMinIO returns the server to use, or why there is none.
func startMinIO() (srv MinIOServer, missing string, err error) {
	if ep := os.Getenv(EnvMinIOEndpoint); ep != "" {
		srv = MinIOServer{Endpoint: ep, AccessKey: os.Getenv(EnvMinIOAccessKey), SecretKey: os.Getenv(EnvMinIOSecretKey)}
		if srv.AccessKey == "" || srv.SecretKey == "" {
			return srv, "", fmt.Errorf("%s is set but %s or %s is empty", EnvMinIOEndpoint, EnvMinIOAccessKey, EnvMinIOSecretKey)
		}
		return srv, "", nil
	}
	bin, err := findMinIO()
	if err != nil {
		return srv, err.Error(), nil
	}
	minioRemoveStale()
	// A port picked free may be taken before minio binds it; try again then.
	for attempt := 1; ; attempt++ {
		srv, err = runMinIO(bin)
		if err == nil || attempt == 3 {
			return srv, "", err
		}
	}
}

// findMinIO looks for the minio binary on PATH, in $GOBIN and in the Go
// path's bin directories.
func findMinIO() (string, error) {
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	// go env prints one line per variable, an empty one for an unset GOBIN.
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(string(out), "\n")
		if len(lines) >= 2 {
			if d := strings.TrimSpace(lines[0]); d != "" {
				dirs = append(dirs, d)
			}
			for _, gp := range filepath.SplitList(strings.TrimSpace(lines[1])) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	}
	var uniq []string
	for _, d := range dirs {
		if !slices.Contains(uniq, d) {
			uniq = append(uniq, d)
		}
	}
	dirs = uniq
	name := "minio"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("minio binary not on PATH nor in %s", strings.Join(dirs, ", "))
}

// runMinIO starts one server in a new temp directory, on free loopback
// ports, and waits until it is live.
func runMinIO(bin string) (_ MinIOServer, err error) {
	// The goroutine that waits for the shared server is this function's
	// first closure (runMinIO.func1): leak checks of other packages ignore
	// it by that name, since the server lives until the test binary exits.
	body := make(chan func(), 1)
	go func() {
		if f := <-body; f != nil {
			f()
		}
	}()
	p, err := newMinIOProc(bin)
	if err != nil {
		close(body)
		return MinIOServer{}, err
	}
	if err := p.start(func(f func()) { body <- f }); err != nil {
		os.RemoveAll(p.root)
		return MinIOServer{}, err
	}
	return p.srv, nil
}

// minioProc is one MinIO server process, which can be stopped and started
// again on the same addresses, credentials and data directory.
type minioProc struct {
	bin  string
	root string
	srv  MinIOServer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    *minioTail
}

func newMinIOProc(bin string) (*minioProc, error) {
	root, err := os.MkdirTemp("", minioDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("create minio dir: %w", err)
	}
	apiPort, err := minioFreePort()
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return &minioProc{
		bin:  bin,
		root: root,
		srv: MinIOServer{
			Endpoint:  net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)),
			AccessKey: "edgetest",
			SecretKey: "edgetest-" + minioRandHex(12),
		},
	}, nil
}

// start runs the server and waits until it is live. launch runs its
// argument, which waits for the process, in a goroutine of its own.
func (p *minioProc) start(launch func(func())) error {
	cmd := exec.Command(p.bin, "server",
		"--address", p.srv.Endpoint,
		"--certs-dir", filepath.Join(p.root, "certs"),
		filepath.Join(p.root, "data"))
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+p.srv.AccessKey,
		"MINIO_ROOT_PASSWORD="+p.srv.SecretKey,
		"MINIO_UPDATE=off",
		"MINIO_CI_CD=on",
		// No web console. MinIO starts it after the API is live and exits
		// when its port cannot be bound: a port picked free and taken by
		// another process meanwhile (other test binaries run beside this
		// one) killed a server the tests were already using.
		"MINIO_BROWSER=off",
	)
	out := &minioTail{max: 64 << 10}
	cmd.Stdout = out
	cmd.Stderr = out
	minioSetDeathSignal(cmd)

	exited := make(chan struct{})
	started := make(chan error, 1)
	launch(func() {
		// The server is killed when the thread that started it ends (see
		// minioSetDeathSignal), so that thread stays with this goroutine
		// until the server is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	})
	if err := <-started; err != nil {
		return fmt.Errorf("run %s: %w", p.bin, err)
	}
	p.mu.Lock()
	p.cmd, p.exited, p.out = cmd, exited, out
	p.mu.Unlock()

	live := "http://" + p.srv.Endpoint + "/minio/health/live"
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("minio exited before it was live: %s", out.String())
		default:
		}
		if resp, err := client.Get(live); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("minio not live after 90s: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL, as a crash or a power cut would)
// and waits until it is gone.
func (p *minioProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// minioRemoveStale removes the directories of servers whose test binary has
// exited.
func minioRemoveStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), minioDirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), minioDirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || minioProcessAlive(pid) {
			continue
		}
		os.RemoveAll(d)
	}
}

func minioFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func minioRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// minioTail keeps the last max bytes written to it.
type minioTail struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (w *minioTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if over := w.buf.Len() - w.max; over > 0 {
		w.buf.Next(over)
	}
	return len(p), nil
}

func (w *minioTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.TrimSpace(w.buf.String())
	if s == "" {
		return "(no output)"
	}
	return s
}
