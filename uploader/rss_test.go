package uploader

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// Environment of the helper process that BenchmarkPeakRSS starts.
const (
	envHelperMode     = "EDGE_UPLOADER_RSS_MODE" // spool, bare or idle
	envHelperFile     = "EDGE_UPLOADER_RSS_FILE"
	envHelperEndpoint = "EDGE_UPLOADER_RSS_ENDPOINT"
	envHelperBucket   = "EDGE_UPLOADER_RSS_BUCKET"
	envHelperKeys     = "EDGE_UPLOADER_RSS_KEYS" // access:secret
)

// TestRSSHelperProcess is not a test: it is the process BenchmarkPeakRSS
// measures. It uploads one file as the agent would (Spool.Put over the
// direct uploader with the default part size and parallelism), or with a
// bare minio-go PutObject, or does nothing, then prints its peak resident
// set size (VmHWM).
func TestRSSHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelperMode)
	if mode == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	access, secret, _ := strings.Cut(os.Getenv(envHelperKeys), ":")
	endpoint, bucket, path := os.Getenv(envHelperEndpoint), os.Getenv(envHelperBucket), os.Getenv(envHelperFile)
	var err error
	switch mode {
	case "spool":
		var s3 *S3
		s3, err = NewS3(S3Options{Endpoint: endpoint, Bucket: bucket, AccessKey: access, SecretKey: secret})
		if err != nil {
			break
		}
		var spool *Spool
		spool, err = NewSpool(filepath.Join(filepath.Dir(path), "spool"), s3, SpoolOptions{})
		if err != nil {
			break
		}
		_, err = spool.Put(ctx, testToken, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path})
	case "bare":
		var c *minio.Client
		c, err = minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1"})
		if err != nil {
			break
		}
		var f *os.File
		if f, err = os.Open(path); err != nil {
			break
		}
		defer f.Close()
		fi, _ := f.Stat()
		_, err = c.PutObject(ctx, bucket, "bare/rec.mp4", f, fi.Size(), minio.PutObjectOptions{ContentType: "video/mp4"})
	case "idle":
	}
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	hwm, err := vmHWM()
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("VmHWM_KB %d\n", hwm)
}

// vmHWM returns the process's peak resident set size in KiB.
func vmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// peakRSS runs the helper process in mode on the file at path and returns
// its peak RSS in MiB.
func peakRSS(t testing.TB, srv testenv.MinIOServer, mode, path string) float64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRSSHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envHelperMode+"="+mode, envHelperFile+"="+path, envHelperEndpoint+"="+srv.Endpoint,
		envHelperBucket+"="+srv.Bucket, envHelperKeys+"="+srv.AccessKey+":"+srv.SecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", mode, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM_KB "); ok {
			if kb, err := strconv.ParseInt(rest, 10, 64); err == nil {
				return float64(kb) / 1024
			}
		}
	}
	t.Fatalf("%s: no VmHWM in output:\n%s", mode, out)
	return 0
}

// TestPeakRSS uploads a 128 MiB file (80 MiB with -short) in a process of
// its own and checks its peak RSS: under 64 MiB, and less than 40 MiB above
// a process that uploads nothing (the part that grows with what the upload
// holds; the race detector inflates the rest). Holding the file, or four
// parts of 16 MiB, would fail it.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	size := int64(128 * mib)
	if testing.Short() {
		size = 80 * mib
	}
	srv := testenv.MinIO(t)
	path, _ := writeRandomFile(t, size, 131)
	idle := peakRSS(t, srv, "idle", path)
	spool := peakRSS(t, srv, "spool", path)
	t.Logf("peak RSS uploading %d MiB: %.1f MiB (idle process %.1f MiB, race detector %v)", size/mib, spool, idle, raceEnabled)
	if spool-idle > 40 {
		t.Errorf("uploading %d MiB raised the peak RSS by %.1f MiB, want under 40", size/mib, spool-idle)
	}
	if !raceEnabled && spool >= 64 {
		t.Errorf("peak RSS %.1f MiB, want under 64", spool)
	}
}

// BenchmarkPeakRSS measures the peak RSS of a process uploading a 1 GiB file
// from disk: the agent's path (Spool.Put, direct mode, default part size and
// parallelism), a bare minio-go PutObject of the same file, and a process
// that uploads nothing (the test binary's own floor). It reports MiB; the
// agent's target is under 64 MiB. EDGE_BENCH_RSS_MIB changes the size.
func BenchmarkPeakRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc/self/status")
	}
	size := int64(1024 * mib)
	if s := os.Getenv("EDGE_BENCH_RSS_MIB"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("EDGE_BENCH_RSS_MIB=%q", s)
		}
		size = n * mib
	}
	srv := testenv.MinIO(b)
	path, _ := writeRandomFile(b, size, 121)
	for b.Loop() {
		for _, mode := range []string{"idle", "bare", "spool"} {
			b.ReportMetric(peakRSS(b, srv, mode, path), "MiB-peak-rss-"+mode)
		}
	}
}
