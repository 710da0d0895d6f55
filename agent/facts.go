package agent

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
)

// Charge policy events (docs/capture.md, Resting phones), passed to the
// charge hook as {event}.
const (
	// EventLowBattery: the phone's battery fell under rest.min_battery and
	// it rests; a smart plug should start charging.
	EventLowBattery = "low_battery"
	// EventCharged: the phone charges and reached rest.charged_battery; a
	// smart plug may stop charging (batteries kept at 100% swell).
	EventCharged = "charged"
	// EventHot: the phone's battery went over rest.max_temp_c and it
	// rests; charging heats it too.
	EventHot = "hot"
	// EventCooled: a phone that rested for heat cooled to
	// rest.resume_temp_c.
	EventCooled = "cooled"
)

// factsReadTimeout bounds one read of a phone's facts.
const factsReadTimeout = 30 * time.Second

// PhoneWatch reads the facts of every usable phone of an inventory when
// it connects and every facts_interval afterwards, records them in the
// inventory (hello and heartbeat carry them), and makes a phone rest while
// it is too hot or its battery too low (docs/capture.md, Resting phones),
// running the charge hook on each charge policy event.
type PhoneWatch struct {
	inv *capture.Inventory
	cfg config.Phones
	log zerolog.Logger

	mu       sync.Mutex
	phones   map[string]*watched
	hooks    chan hookRun
	onChange func() // a phone started or stopped resting, came, went or changed state
	// states is each phone's state at the last pass, to tell the
	// coordinator of a change at once.
	states  map[string]string
	resting prometheus.Gauge
	events  *prometheus.CounterVec
}

// watched is what the watch knows of one phone.
type watched struct {
	read    time.Time // last read, zero before the first since it connected
	hot     bool
	low     bool
	charged bool // EventCharged was sent and the level has not fallen since
}

type hookRun struct{ serial, event string }

// NewPhoneWatch returns the watch of inv with the phones section of the
// agent's config.
func NewPhoneWatch(inv *capture.Inventory, cfg config.Phones, log zerolog.Logger) *PhoneWatch {
	w := &PhoneWatch{inv: inv, cfg: cfg, log: log, phones: map[string]*watched{}, hooks: make(chan hookRun, 64), onChange: func() {},
		resting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_phones_resting", Help: "Phones resting now (too hot or battery too low).",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_phone_rest_events_total",
			Help: "Charge policy events of the phones: hot, cooled, low_battery, charged.",
		}, []string{"event"}),
	}
	for _, e := range []string{EventHot, EventCooled, EventLowBattery, EventCharged} {
		w.events.WithLabelValues(e)
	}
	return w
}

// Register registers the watch's metrics in reg.
func (w *PhoneWatch) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{w.resting, w.events} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register phone watch metrics: %w", err)
		}
	}
	return nil
}

// OnChange sets what to call when a phone starts or stops resting, is
// connected or removed, or changes state (offline, device, unauthorized…):
// the coordinator should hear of it at once, not at the next heartbeat,
// so that it grants nothing on a phone that is not ready (docs/operations.md,
// A refused assign).
// Call it before Run.
func (w *PhoneWatch) OnChange(f func()) { w.onChange = f }

// Run watches until ctx is done.
func (w *PhoneWatch) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.runHooks(ctx) })
	interval := w.cfg.FactsInterval.Duration()
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	for {
		changed := w.inv.Changed()
		next := w.pass(ctx, interval)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// pass reads, at the same time, the facts of every usable phone that has
// none since it connected or whose facts are older than interval, and
// returns how long until the next read is due.
func (w *PhoneWatch) pass(ctx context.Context, interval time.Duration) time.Duration {
	next := interval
	seen := map[string]bool{}
	var due []string
	states := map[string]string{}
	w.mu.Lock()
	for _, info := range w.inv.Devices() {
		seen[info.Serial] = true
		states[info.Serial] = info.State
		ph := w.phones[info.Serial]
		if ph == nil {
			ph = &watched{}
			w.phones[info.Serial] = ph
		}
		usable := info.State == protocol.DeviceReady || info.State == protocol.DeviceResting
		switch {
		case !usable:
			// Read again once it is back: it may have been swapped.
			ph.read = time.Time{}
		case time.Since(ph.read) >= interval:
			due = append(due, info.Serial)
		default:
			next = min(next, interval-time.Since(ph.read))
		}
	}
	for s := range w.phones {
		if !seen[s] {
			delete(w.phones, s)
		}
	}
	w.resting.Set(float64(w.restingLocked()))
	changed := w.states != nil && !maps.Equal(w.states, states)
	w.states = states
	w.mu.Unlock()
	if changed {
		w.onChange()
	}
	var wg sync.WaitGroup
	for _, serial := range due {
		wg.Go(func() { w.read(ctx, serial) })
	}
	wg.Wait()
	return max(next, 10*time.Millisecond)
}

// read reads one phone's facts, records them and applies the rest rules.
func (w *PhoneWatch) read(ctx context.Context, serial string) {
	d, ok := w.inv.Get(serial)
	if !ok {
		return
	}
	fr, ok := d.(capture.FactsReader)
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, factsReadTimeout)
	f, err := fr.Facts(rctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	if ph := w.phones[serial]; ph != nil {
		ph.read = time.Now()
	}
	w.mu.Unlock()
	if err != nil {
		w.log.Warn().Str("serial", serial).Err(err).Msg("read phone facts")
		if f.ReadAtUnixMilli == 0 {
			return // nothing read
		}
	}
	w.inv.SetFacts(serial, f)
	w.log.Debug().Str("serial", serial).Str("facts", f.Summary()).Msg("phone facts")
	w.rest(serial, f)
}

// restingLocked counts the phones resting now.
func (w *PhoneWatch) restingLocked() int {
	n := 0
	for _, p := range w.phones {
		if p.hot || p.low {
			n++
		}
	}
	return n
}

// rest applies the rest rules to the phone's new facts: it rests while
// its battery is over max_temp_c (until it cools to resume_temp_c) or under
// min_battery (until it charges to resume_battery). A fact not known keeps
// the rule's last decision. Charge policy events are queued for the hook.
func (w *PhoneWatch) rest(serial string, f protocol.PhoneFacts) {
	r := w.cfg.Rest
	w.mu.Lock()
	ph := w.phones[serial]
	if ph == nil {
		w.mu.Unlock()
		return
	}
	wasHot, wasLow := ph.hot, ph.low
	var events []string
	if t := f.BatteryTempC; t != nil {
		switch {
		case r.MaxTempC <= 0:
			ph.hot = false
		case !ph.hot && *t > r.MaxTempC:
			ph.hot = true
		case ph.hot && *t <= r.ResumeTempC:
			ph.hot = false
		}
	}
	if l := f.BatteryLevel; l != nil {
		switch {
		case r.MinBattery <= 0:
			ph.low = false
		case !ph.low && *l < r.MinBattery:
			ph.low = true
		case ph.low && *l >= r.ResumeBattery:
			ph.low = false
		}
		if r.ChargedBattery > 0 {
			if *l < r.ChargedBattery {
				ph.charged = false
			} else if !ph.charged && f.Charging != nil && *f.Charging {
				ph.charged = true
				events = append(events, EventCharged)
			}
		}
	}
	hot, low := ph.hot, ph.low
	w.resting.Set(float64(w.restingLocked()))
	w.mu.Unlock()
	if hot && !wasHot {
		events = append(events, EventHot)
	}
	if !hot && wasHot {
		events = append(events, EventCooled)
	}
	if low && !wasLow {
		events = append(events, EventLowBattery)
	}
	var why []string
	if hot {
		why = append(why, fmt.Sprintf("battery %.1f °C over the %g °C limit (offered again at %g °C)", *f.BatteryTempC, r.MaxTempC, r.ResumeTempC))
	}
	if low {
		why = append(why, fmt.Sprintf("battery %d%% under the %d%% limit (offered again at %d%%)", *f.BatteryLevel, r.MinBattery, r.ResumeBattery))
	}
	reason := strings.Join(why, "; ")
	w.inv.SetResting(serial, reason)
	switch {
	case (hot || low) && (hot != wasHot || low != wasLow):
		w.log.Warn().Str("serial", serial).Str("reason", reason).Msg("phone resting: not offered jobs until it recovers")
	case !hot && !low && (wasHot || wasLow):
		w.log.Info().Str("serial", serial).Msg("phone recovered: offered jobs again")
	}
	if (hot || low) != (wasHot || wasLow) {
		w.onChange()
	}
	for _, e := range events {
		w.events.WithLabelValues(e).Inc()
		if len(r.ChargeHook) == 0 {
			continue
		}
		select {
		case w.hooks <- hookRun{serial: serial, event: e}:
		default:
			w.log.Warn().Str("serial", serial).Str("event", e).Msg("charge hook queue full: event dropped")
		}
	}
}

// runHooks runs the charge hook for each queued event, one at a time, in
// order.
func (w *PhoneWatch) runHooks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-w.hooks:
			w.runHook(ctx, h)
		}
	}
}

// hookTail is how much of the hook's output is logged (its end).
const hookTail = 200

func (w *PhoneWatch) runHook(ctx context.Context, h hookRun) {
	r := w.cfg.Rest
	args := make([]string, len(r.ChargeHook))
	for i, a := range r.ChargeHook {
		a = strings.ReplaceAll(a, "{serial}", h.serial)
		args[i] = strings.ReplaceAll(a, "{event}", h.event)
	}
	hctx, cancel := context.WithTimeout(ctx, r.ChargeHookTimeout.Duration())
	defer cancel()
	cmd := exec.CommandContext(hctx, args[0], args[1:]...)
	cmd.WaitDelay = 2 * time.Second
	out := &tailBuffer{max: hookTail}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err := cmd.Run()
	ev := w.log.Info()
	if err != nil {
		ev = w.log.Warn().Err(err)
		if hctx.Err() != nil && ctx.Err() == nil {
			ev = w.log.Warn().Err(fmt.Errorf("charge hook timed out after %s (phones.rest.charge_hook_timeout): %w", r.ChargeHookTimeout, err))
		}
	}
	ev.Str("serial", h.serial).Str("event", h.event).Dur("took", time.Since(start)).Str("output_tail", out.String()).Msg("charge hook ran")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.b), ""))
	if t.cut {
		s = "…" + s
	}
	return s
}
