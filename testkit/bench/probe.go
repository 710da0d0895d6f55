package bench

import (
	"sync"
	"time"
)

// wakeProbe measures how late this process gets to run: a goroutine sleeps
// 1 ms again and again and records by how much each sleep overran. On an
// idle machine the overrun is tens of microseconds; when other work keeps
// the cores busy it grows, and no latency measured in the same process can
// be shorter. Scenarios print it beside their latencies.
type wakeProbe struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	d    []time.Duration
}

func startProbe() *wakeProbe {
	p := &wakeProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(time.Millisecond)
		defer t.Stop()
		for {
			start := time.Now()
			t.Reset(time.Millisecond)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			over := time.Since(start) - time.Millisecond
			p.mu.Lock()
			p.d = append(p.d, max(0, over))
			p.mu.Unlock()
		}
	}()
	return p
}

// Stop ends the probe and summarises the overruns.
func (p *wakeProbe) Stop() Summary {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return Summarize(p.d)
}
