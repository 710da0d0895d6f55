package uploader

import (
	"context"
	"io"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// bandwidth is an upload bandwidth limit shared by every request of one
// uploader: a token bucket refilled at the limit, holding at most burst
// bytes, so a request waits before each read it hands to the network.
type bandwidth struct {
	lim   *rate.Limiter
	burst int
}

// newBandwidth returns a limit of bytesPerSecond, or nil for none.
func newBandwidth(bytesPerSecond int64) *bandwidth {
	if bytesPerSecond <= 0 {
		return nil
	}
	// A tenth of a second of traffic per read, between 4 KiB and 256 KiB:
	// small enough to keep the rate even, large enough to keep the
	// overhead low.
	burst := int(min(max(bytesPerSecond/10, 4<<10), 256<<10))
	return &bandwidth{lim: rate.NewLimiter(rate.Limit(bytesPerSecond), burst), burst: burst}
}

// tracker follows the progress of one upload: bytes stored (parts done or
// resumed) plus bytes of requests in flight. A failed request's bytes are
// taken back, so progress may go back before it goes forward again.
type tracker struct {
	total  int64
	done   atomic.Int64
	report func(int64)
	m      *Metrics
}

func newTracker(total int64, report func(int64), m *Metrics) *tracker {
	t := &tracker{total: max(total, 0), report: report, m: m}
	m.inflightAdd(0, t.total)
	return t
}

func (t *tracker) add(n int64) {
	if n == 0 {
		return
	}
	v := t.done.Add(n)
	t.m.inflightAdd(n, 0)
	if t.report != nil {
		t.report(v)
	}
}

// finish removes the upload from the in-flight gauges.
func (t *tracker) finish() {
	t.m.inflightAdd(-t.done.Load(), -t.total)
}

// sendReader is the body of one request: it counts what the transport reads
// from it (progress, metrics), and waits for the bandwidth limit first.
type sendReader struct {
	ctx context.Context
	r   io.Reader
	bw  *bandwidth
	tr  *tracker
	m   *Metrics
	n   atomic.Int64 // read so far, taken back from the tracker on failure
}

func newSendReader(ctx context.Context, r io.Reader, bw *bandwidth, tr *tracker, m *Metrics) *sendReader {
	return &sendReader{ctx: ctx, r: r, bw: bw, tr: tr, m: m}
}

func (s *sendReader) Read(p []byte) (int, error) {
	if s.bw != nil && len(p) > 0 {
		p = p[:min(len(p), s.bw.burst)]
		if err := s.bw.lim.WaitN(s.ctx, len(p)); err != nil {
			return 0, err
		}
	}
	n, err := s.r.Read(p)
	if n > 0 {
		s.n.Add(int64(n))
		s.tr.add(int64(n))
		s.m.sent(n)
	}
	return n, err
}

// failed takes the bytes of a failed request back from the progress.
func (s *sendReader) failed() {
	s.tr.add(-s.n.Swap(0))
}
