package uploader

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// BenchmarkUpload compares uploads of a recording-sized file with a bare
// minio-go PutObject of the same file to the same server, in one run and
// interleaved round by round, so that both see the same machine load. Each
// round uploads the file once per variant, in rotating order. MB/s-<variant>
// is the median over the rounds; x-bare-<variant> is the median over the
// rounds of that round's bare time divided by the variant's, so that a load
// change between rounds cancels out (run with -benchtime=Nx for N rounds).
// On a machine shared with other work, wall time follows the load; the CPU
// time the upload costs, in this process and in the MinIO server together,
// does not: cpu-ms/MiB-<variant> is that cost and x-bare-cpu-<variant> the
// bare cost divided by the variant's. The server is a dedicated one, whose
// CPU time is read from /proc. Variants:
//
//	bare      minio-go Client.PutObject of the file (size given)
//	spooled   S3.Upload of a spool file, its SHA-256 known from the spool's copy
//	sha-given S3.Upload of a file with a declared SHA-256 (checked in a first pass)
//	no-sha    S3.Upload of a file without SHA-256 (hashed in a first pass)
//	spool-put Spool.Put end to end: copy into the spool with hashing and fsync, then upload
//	capture-put Spool.Put end to end of a capture: its SHA-256 computed as it was
//	          written (Artifact.Hashed), linked into the spool, then uploaded
func BenchmarkUpload(b *testing.B) {
	size := int64(128 * mib)
	if s := os.Getenv("EDGE_BENCH_UPLOAD_MIB"); s != "" {
		var n int64
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			b.Fatalf("EDGE_BENCH_UPLOAD_MIB=%q", s)
		}
		size = n * mib
	}
	// Default part size and parallelism: what the agent runs with.
	srv := testenv.StartMinIOProcess(b)
	e := &env{raw: srv.Client(b), srv: srv.MinIOServer}
	var err error
	if e.s, err = NewS3(S3Options{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}); err != nil {
		b.Fatal(err)
	}
	path, sha := writeRandomFile(b, size, 9)
	spool, err := NewSpool(b.TempDir(), e.s, SpoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	tok := func() (t2 fencing.Token) {
		n++
		t2 = testToken
		t2.JobID = fmt.Sprintf("bench-%d", n)
		return t2
	}
	variants := []struct {
		name string
		run  func() error
	}{
		{"bare", func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			n++
			_, err = e.raw.PutObject(ctx, e.srv.Bucket, fmt.Sprintf("bare/%d", n), f, size, minio.PutObjectOptions{})
			return err
		}},
		{"spooled", func() error {
			_, err := e.s.Upload(ctx, tok(), Artifact{Name: "rec.mp4", Path: path, SHA256: sha, Size: size, hashed: true})
			return err
		}},
		{"sha-given", func() error {
			_, err := e.s.Upload(ctx, tok(), Artifact{Name: "rec.mp4", Path: path, SHA256: sha})
			return err
		}},
		{"no-sha", func() error {
			_, err := e.s.Upload(ctx, tok(), Artifact{Name: "rec.mp4", Path: path})
			return err
		}},
		{"spool-put", func() error {
			_, err := spool.Put(ctx, tok(), Artifact{Name: "rec.mp4", Path: path, SHA256: sha})
			return err
		}},
		{"capture-put", func() error {
			_, err := spool.Put(ctx, tok(), Artifact{Name: "rec.mp4", Path: path, SHA256: sha, Hashed: true})
			return err
		}},
	}
	if only := os.Getenv("EDGE_BENCH_UPLOAD_VARIANTS"); only != "" {
		// bare always runs: it is what the others are measured against.
		keep := variants[:1]
		for _, v := range variants[1:] {
			if slices.Contains(strings.Split(only, ","), v.name) {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	times := make([][]time.Duration, len(variants))
	cpu := make([]time.Duration, len(variants))
	split := make([][2]time.Duration, len(variants)) // client, server
	b.SetBytes(size)
	round := 0
	for b.Loop() {
		for i := range variants {
			j := (i + round) % len(variants)
			self0, srv0 := cpuTime(b, srv.PID())
			start := time.Now()
			if err := variants[j].run(); err != nil {
				b.Fatalf("%s: %v", variants[j].name, err)
			}
			times[j] = append(times[j], time.Since(start))
			self1, srv1 := cpuTime(b, srv.PID())
			cpu[j] += self1 - self0 + srv1 - srv0
			split[j][0] += self1 - self0
			split[j][1] += srv1 - srv0
		}
		round++
	}
	median := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	for i, v := range variants {
		b.ReportMetric(float64(size)/median(times[i]).Seconds()/1e6, "MB/s-"+v.name)
		if cpu[0] > 0 {
			perMiB := func(d time.Duration) float64 {
				return float64(d.Microseconds()) / 1000 / float64(round) / float64(size/mib)
			}
			b.ReportMetric(perMiB(cpu[i]), "cpu-ms/MiB-"+v.name)
			b.ReportMetric(perMiB(split[i][0]), "client-cpu-ms/MiB-"+v.name)
			b.ReportMetric(perMiB(split[i][1]), "server-cpu-ms/MiB-"+v.name)
			if i > 0 {
				b.ReportMetric(cpu[0].Seconds()/cpu[i].Seconds(), "x-bare-cpu-"+v.name)
			}
		}
		if i == 0 {
			continue
		}
		ratios := make([]float64, len(times[i]))
		for r := range ratios {
			ratios[r] = times[0][r].Seconds() / times[i][r].Seconds()
		}
		sort.Float64s(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "x-bare-"+v.name)
	}
}
