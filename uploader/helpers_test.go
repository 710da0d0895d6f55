package uploader

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// newMetrics returns metrics registered with a registry of the test's own.
func newMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// counter returns the value of a counter or gauge.
func counter(c prometheus.Metric) int {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	switch {
	case m.Counter != nil:
		return int(m.Counter.GetValue())
	case m.Gauge != nil:
		return int(m.Gauge.GetValue())
	}
	panic("not a counter or gauge")
}

// faultyS3 returns an uploader for srv whose requests go through a faulty
// transport, with quick retries.
func faultyS3(t testing.TB, srv testenv.MinIOServer, m *Metrics, tweak func(*S3Options)) (*S3, *faulty) {
	t.Helper()
	tr, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	f := &faulty{next: tr}
	opts := S3Options{
		Endpoint:  srv.Endpoint,
		Bucket:    srv.Bucket,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
		PartSize:  5 * mib,
		TempDir:   t.TempDir(),
		Transport: f,
		Retry:     RetryPolicy{Attempts: 4, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Metrics:   m,
	}
	if tweak != nil {
		tweak(&opts)
	}
	s, err := NewS3(opts)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	return s, f
}

// writeRandomFile writes size pseudo-random bytes to a new private file
// without holding them in memory and returns its path and SHA-256. Each MiB
// is one random block with its index written over its first bytes, so that
// no two parts are alike and writing stays fast under the race detector.
func writeRandomFile(t testing.TB, size int64, seed uint64) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "artifact.bin")
	// Private, as the agent's captures are.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, mib)
	if _, err := io.ReadFull(&randReader{r: rand.New(rand.NewPCG(seed, seed+1))}, block); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	w := io.MultiWriter(f, h)
	for i := int64(0); i*mib < size; i++ {
		binary.LittleEndian.PutUint64(block, uint64(i))
		if _, err := w.Write(block[:min(mib, size-i*mib)]); err != nil {
			t.Fatal(err)
		}
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// randReader yields pseudo-random bytes forever.
type randReader struct{ r *rand.Rand }

func (r *randReader) Read(p []byte) (int, error) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		v := r.r.Uint64()
		for j := range 8 {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	for ; i < len(p); i++ {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// storedSHA256 reads an object back and returns its size and SHA-256.
func storedSHA256(t testing.TB, c *minio.Client, bucket, key string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return n, hex.EncodeToString(h.Sum(nil))
}

// incompleteUploads lists the incomplete multipart uploads of a bucket.
func incompleteUploads(t testing.TB, c *minio.Client, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []string
	for u := range c.ListIncompleteUploads(ctx, bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		ids = append(ids, u.Key+" "+u.UploadID)
	}
	return ids
}

// spoolFiles lists the files in a spool directory.
func spoolFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
