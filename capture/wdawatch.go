package capture

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/protocol"
)

// Defaults of WatchIOS.
const (
	DefaultIOSInterval     = 5 * time.Second  // probe of a usable iPhone
	DefaultIOSProbeTimeout = 5 * time.Second  // one probe (/status, /wda/locked)
	DefaultIOSBackoffMax   = 30 * time.Second // longest wait between probes of a phone that is down
)

// IOSPhone is one iPhone of the agent's config (devices[] with platform
// ios).
type IOSPhone struct {
	UDID   string   // the iPhone's UDID: its serial
	WDAURL string   // its WebDriverAgent, e.g. http://127.0.0.1:8100
	Tags   []string // selector tags
}

// IOSOptions configures WatchIOS. Zero values take defaults.
type IOSOptions struct {
	// Interval is how often a usable iPhone is probed; default
	// DefaultIOSInterval.
	Interval time.Duration
	// ProbeTimeout bounds one probe; a WDA that does not answer within
	// it makes the phone offline. Default DefaultIOSProbeTimeout.
	ProbeTimeout time.Duration
	// BackoffMax is the longest wait between two probes of a phone that
	// is down (offline or unauthorized): the wait starts at
	// min(Interval, 1 s) and doubles after each failed probe. Default
	// DefaultIOSBackoffMax.
	BackoffMax time.Duration
	// OpTimeout and CaptureTimeout are the phones' (WDAOptions).
	OpTimeout, CaptureTimeout time.Duration
	// Log receives the phones' state changes.
	Log zerolog.Logger
}

func (o IOSOptions) withDefaults() IOSOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultIOSInterval
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultIOSProbeTimeout
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultIOSBackoffMax
	}
	o.BackoffMax = max(o.BackoffMax, min(o.Interval, time.Second))
	return o
}

// WatchIOS adds each iPhone of phones to inv, in state "connecting", and
// keeps its state current (docs/capture.md, iPhones): it probes the
// phone's WebDriverAgent (/status, then /wda/locked, unlocking a screen
// without passcode) every opts.Interval while it is usable, and with a
// backoff while it is not. A WDA that refuses the connection or does not
// answer within opts.ProbeTimeout makes the phone "offline"; a screen that
// stays locked makes it "unauthorized"; each with its fix in Reason. A
// phone that becomes usable gets a new WDA session. A failed operation
// that finds WDA gone makes the phone offline at once and has it probed
// again. Phones that are in use (an operation talks to WDA) are not
// probed: WDA runs one command at a time.
//
// It fails, adding nothing, when a phone's UDID or WDA URL is not valid,
// when two phones have the same UDID, or one is in inv already. ctx only
// carries values: stop ends the watch, waits for it and deletes the
// phones' WDA sessions; the phones stay in inv with their last state.
func WatchIOS(ctx context.Context, inv *Inventory, phones []IOSPhone, opts IOSOptions) (stop func(), err error) {
	opts = opts.withDefaults()
	devs := make([]*WDADevice, 0, len(phones))
	seen := map[string]bool{}
	for _, p := range phones {
		if seen[p.UDID] {
			return nil, fmt.Errorf("watch iPhones: udid %s listed twice", p.UDID)
		}
		seen[p.UDID] = true
		if _, ok := inv.Get(p.UDID); ok {
			return nil, fmt.Errorf("watch iPhones: udid %s: a phone with this serial is in the inventory already", p.UDID)
		}
		d, err := NewWDADevice(WDAOptions{
			UDID: p.UDID, URL: p.WDAURL, Tags: p.Tags,
			OpTimeout: opts.OpTimeout, CaptureTimeout: opts.CaptureTimeout, Log: opts.Log,
		})
		if err != nil {
			return nil, fmt.Errorf("watch iPhones: %w", err)
		}
		devs = append(devs, d)
	}
	for i, d := range devs {
		if err := inv.Add(d); err != nil {
			for _, added := range devs[:i] {
				inv.Remove(added.Serial())
			}
			return nil, fmt.Errorf("watch iPhones: %w", err)
		}
		opts.Log.Info().Str("serial", d.Serial()).Str("platform", protocol.PlatformIOS).Str("wda_url", d.URL()).Strs("tags", d.opts.Tags).Msg("iPhone added")
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, d := range devs {
		wake := make(chan struct{}, 1)
		d.mu.Lock()
		d.onChange = func() {
			inv.notify()
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		d.mu.Unlock()
		wg.Go(func() { watchIPhone(wctx, d, wake, opts) })
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			var cw sync.WaitGroup
			for _, d := range devs {
				cw.Go(d.Close)
			}
			cw.Wait()
		})
	}, nil
}

// watchIPhone probes one iPhone until ctx ends: at once, then every
// Interval while it is usable, with a doubling backoff while it is not;
// wake (the phone's state changed under an operation) probes it soon.
func watchIPhone(ctx context.Context, d *WDADevice, wake <-chan struct{}, opts IOSOptions) {
	first := min(opts.Interval, time.Second)
	backoff := first
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			if d.phoneState() == protocol.DeviceReady {
				continue // an operation saw it usable again
			}
			// An operation found WDA gone: probe it after the first
			// backoff, as a phone that just went down.
			backoff = first
			t.Reset(backoff)
			continue
		case <-t.C:
		}
		var next time.Duration
		if d.phoneState() == protocol.DeviceReady && d.inUse() {
			next = opts.Interval
		} else if d.Refresh(ctx, opts.ProbeTimeout) == protocol.DeviceReady {
			backoff = first
			next = opts.Interval
		} else {
			next = backoff
			backoff = min(2*backoff, opts.BackoffMax)
		}
		if ctx.Err() != nil {
			return
		}
		t.Reset(next)
	}
}
