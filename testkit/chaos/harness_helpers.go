package chaos

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"math"
	"runtime/metrics"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// ── helpers ─────────────────────────────────────────────────────────────

// probeStalls measures, until ctx is done, how long goroutines of this
// process waited to run: every 10ms it notes how late it woke itself, and
// every 50ms it reads the runtime's histogram of scheduling latencies
// (runtime/metrics /sched/latencies:seconds) and notes the longest wait
// any goroutine had since the last read. It returns every such wait of
// more than 5ms, with when it was seen.
func probeStalls(ctx context.Context) []Stall {
	const every = 10 * time.Millisecond
	var out []Stall
	note := func(at time.Time, late time.Duration) {
		if late > 5*time.Millisecond {
			out = append(out, Stall{At: at, Late: late})
		}
	}
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var prev []uint64
	readSched := func(now time.Time) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return
		}
		h := sample[0].Value.Float64Histogram()
		if prev != nil {
			for i := len(h.Counts) - 1; i >= 0; i-- {
				if i < len(prev) && h.Counts[i] > prev[i] {
					// The bucket's upper bound, or twice its lower bound
					// for the last, open one.
					hi := h.Buckets[i+1]
					if math.IsInf(hi, 1) {
						hi = 2 * h.Buckets[i]
					}
					note(now, time.Duration(hi*float64(time.Second)))
					break
				}
			}
		}
		prev = append(prev[:0], h.Counts...)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	readSched(last)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return out
		case now := <-t.C:
			note(now, now.Sub(last)-every)
			last = now
			if n%5 == 0 {
				readSched(now)
			}
		}
	}
}

// natsErrors sends a connection's asynchronous errors to log instead of
// stderr.
func natsErrors(log zerolog.Logger) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		log.Debug().Err(err).Msg("nats connection error")
	})
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool { return sleepCtx(ctx, time.Until(t)) }

func randUint() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
