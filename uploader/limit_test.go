package uploader

import (
	"bytes"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestBandwidthLimit uploads 1.5 MiB at 1 MiB/s. A token bucket lets at
// most its burst through at once, so the upload cannot take less than
// (size − burst) / rate; only that lower bound is checked.
func TestBandwidthLimit(t *testing.T) {
	srv := testenv.MinIO(t)
	const rate = 1 * mib
	s3, _ := faultyS3(t, srv, nil, func(o *S3Options) { o.BytesPerSecond = rate })
	body := randomBytes(3*mib/2, 111)
	burst := s3.bw.burst
	start := time.Now()
	res, err := s3.Upload(testCtx(t), testToken, Artifact{Name: "limited", Body: bytes.NewReader(body)})
	took := time.Since(start)
	if err != nil || res.SHA256 != sum(body) {
		t.Fatalf("Upload = %+v, %v", res, err)
	}
	floor := time.Duration(float64(len(body)-burst) / rate * float64(time.Second))
	if took < floor {
		t.Errorf("1.5 MiB at 1 MiB/s took %v, want at least %v", took, floor)
	}
	t.Logf("1.5 MiB at 1 MiB/s took %v (floor %v)", took, floor)
}

func TestNewBandwidth(t *testing.T) {
	if newBandwidth(0) != nil || newBandwidth(-1) != nil {
		t.Errorf("no limit wanted for 0 and -1")
	}
	for bps, want := range map[int64]int{1000: 4 << 10, 1 << 20: 104857, 100 << 20: 256 << 10} {
		if got := newBandwidth(bps).burst; got != want {
			t.Errorf("burst for %d B/s = %d, want %d", bps, got, want)
		}
	}
}
