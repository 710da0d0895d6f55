package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
)

// HubWindow is how close together phones must drop to be reported as one
// hub event (docs/capture.md, Recovery).
const HubWindow = time.Second

// Recovery is the recovery ladder for phones that are listed but do not
// answer (docs/capture.md, Recovery): a probe before each job and every
// probe interval while idle; on a failed probe rung 1 reconnects the
// transport, rung 2 (opt-in) reboots the phone, and after quarantine_after
// failed probes within the window the phone is quarantined until it
// answers a probe again. It also reports phones that drop within HubWindow
// of each other as one hub event. Only phones implementing
// capture.Recoverable are looked after: adb phones and iPhones (whose
// reconnect re-creates the WebDriverAgent session and which cannot be
// rebooted, so rung 2 fails at once for them).
type Recovery struct {
	inv  *capture.Inventory
	opts config.Recovery
	log  zerolog.Logger
	m    *recoveryMetrics

	mu       sync.Mutex
	phones   map[string]*phoneRecovery
	onChange func()                   // the coordinator should hear of a change
	onHub    func(serials []string)   // a hub event (for the status document)
	last     map[string]string        // serial → adb state at the last look
	drops    map[string]time.Time     // phones dropped, waiting for the hub window
	hubTimer *time.Timer              // ends the hub window
	now      func() time.Time         // wall clock
	probing  map[string]chan struct{} // serials with a probe or ladder running
	// serverLost is when the adb server's device list was last lost:
	// drops within HubWindow after it are the server's, not a hub's.
	serverLost time.Time
	// runCtx and ladders: the ladders BeforeJob starts run under Run's
	// context and end before Run returns.
	runCtx  context.Context
	ladders sync.WaitGroup
}

// phoneRecovery is the ladder's state of one phone.
type phoneRecovery struct {
	failures []time.Time // failed probes within the window
	rec      protocol.DeviceRecovery
	state    string // "", protocol.DeviceRecovering or protocol.DeviceQuarantined
	reason   string
	ladder   bool // the ladder runs on the phone (its own reconnects are not drops)
}

type recoveryMetrics struct {
	rungs       *prometheus.CounterVec
	quarantined prometheus.Gauge
	hubDrops    prometheus.Counter
}

// NewRecovery returns the ladder for the phones of inv with its metrics
// registered in reg. Run starts its idle probes and hub watch.
func NewRecovery(inv *capture.Inventory, opts config.Recovery, reg prometheus.Registerer, log zerolog.Logger) (*Recovery, error) {
	m := &recoveryMetrics{
		rungs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeagent_phone_recovery_total",
			Help: "Rungs of the phone recovery ladder, by rung (probe, reconnect, reboot, quarantine) and result (ok, failed; quarantine: entered, lifted).",
		}, []string{"rung", "result"}),
		quarantined: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeagent_phones_quarantined", Help: "Phones quarantined now.",
		}),
		hubDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeagent_hub_drops_total", Help: "Hub events: two or more phones that dropped within a second of each other, counted once.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.rungs, m.quarantined, m.hubDrops} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register recovery metrics: %w", err)
			}
		}
	}
	for _, r := range []string{protocol.RungProbe, protocol.RungReconnect, protocol.RungReboot} {
		m.rungs.WithLabelValues(r, "ok")
		m.rungs.WithLabelValues(r, "failed")
	}
	m.rungs.WithLabelValues(protocol.RungQuarantine, "entered")
	m.rungs.WithLabelValues(protocol.RungQuarantine, "lifted")
	return &Recovery{
		inv: inv, opts: opts, log: log.With().Str("component", "recovery").Logger(), m: m,
		phones: map[string]*phoneRecovery{}, last: map[string]string{}, drops: map[string]time.Time{},
		now: time.Now, probing: map[string]chan struct{}{},
		onChange: func() {}, onHub: func([]string) {},
	}, nil
}

// notify sets what to call when a phone's state or record changed (the
// coordinator should hear of it at once) and when a hub event happened.
func (r *Recovery) notify(onChange func(), onHub func([]string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onChange, r.onHub = onChange, onHub
}

// Run probes idle phones every probe interval and watches the inventory
// for hub events, until ctx ends.
func (r *Recovery) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	r.mu.Lock()
	r.runCtx = ctx
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.runCtx = nil
		r.mu.Unlock()
		r.ladders.Wait()
	}()
	var tick <-chan time.Time
	if iv := r.opts.ProbeInterval.Duration(); iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	// The channel is taken before each look, so that a change made while
	// looking wakes the loop again instead of being missed.
	changed := r.inv.Changed()
	r.look()
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			if r.hubTimer != nil {
				r.hubTimer.Stop()
			}
			r.mu.Unlock()
			return
		case <-changed:
			changed = r.inv.Changed()
			r.look()
		case <-tick:
			for _, serial := range r.idle() {
				wg.Go(func() { r.check(ctx, serial) })
			}
		}
	}
}

// idle returns the phones to probe now: recoverable, listed as device by
// adb, not held by a job, no probe running (quarantined ones included: they
// come back once they answer).
func (r *Recovery) idle() []string {
	var out []string
	for _, d := range r.inv.Devices() {
		dev, ok := r.inv.Get(d.Serial)
		if !ok {
			continue
		}
		if _, ok := dev.(capture.Recoverable); !ok || !capture.Listed(dev.Info().State) || r.inv.Busy(d.Serial) {
			continue
		}
		r.mu.Lock()
		_, running := r.probing[d.Serial]
		r.mu.Unlock()
		if !running {
			out = append(out, d.Serial)
		}
	}
	return out
}

// BeforeJob probes the phone a job is about to run on. A phone that does
// not answer fails the job's acquire with capture.ErrNotAnswering (an
// infrastructure failure: the coordinator retries the job, on another
// phone since this one is now recovering) and starts the ladder on it.
func (r *Recovery) BeforeJob(ctx context.Context, d capture.Device) error {
	rd, ok := d.(capture.Recoverable)
	if !ok {
		return nil
	}
	serial := d.Serial()
	err := rd.Probe(ctx, r.opts.ProbeTimeout.Duration())
	if err == nil || ctx.Err() != nil || !errors.Is(err, capture.ErrNotAnswering) {
		if err == nil {
			r.m.rungs.WithLabelValues(protocol.RungProbe, "ok").Inc()
		}
		return err
	}
	if !r.probeFailed(serial, err, "before a job") {
		r.hold(serial, protocol.DeviceRecovering, "did not answer the probe before a job; reconnecting (rung 1)")
		r.mu.Lock()
		if rctx := r.runCtx; rctx != nil {
			r.ladders.Go(func() { r.ladder(rctx, rd) })
		}
		r.mu.Unlock()
	}
	return fmt.Errorf("phone %s did not answer the probe before the job; it is recovering: %w", serial, err)
}

// check probes an idle phone and runs the ladder when it does not answer;
// a quarantined phone that answers is lifted.
func (r *Recovery) check(ctx context.Context, serial string) {
	dev, ok := r.inv.Get(serial)
	if !ok {
		return
	}
	rd, ok := dev.(capture.Recoverable)
	if !ok {
		return
	}
	if !r.begin(serial) {
		return
	}
	defer r.end(serial)
	err := rd.Probe(ctx, r.opts.ProbeTimeout.Duration())
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		r.m.rungs.WithLabelValues(protocol.RungProbe, "ok").Inc()
		r.answered(serial, "probe ok")
		return
	}
	if !errors.Is(err, capture.ErrNotAnswering) {
		return // not listed as device any more: adb's state says it
	}
	if r.probeFailed(serial, err, "while idle") {
		return // quarantined, or already quarantined
	}
	r.climb(ctx, rd)
}

// ladder runs the ladder on a phone whose probe before a job failed.
func (r *Recovery) ladder(ctx context.Context, rd capture.Recoverable) {
	if !r.begin(rd.Serial()) {
		return
	}
	defer r.end(rd.Serial())
	r.mu.Lock()
	q := r.phone(rd.Serial()).state == protocol.DeviceQuarantined
	r.mu.Unlock()
	if !q {
		r.climb(ctx, rd)
	}
}

// begin marks a probe or ladder running on serial; false when one is.
func (r *Recovery) begin(serial string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.probing[serial]; ok {
		return false
	}
	r.probing[serial] = make(chan struct{})
	return true
}

func (r *Recovery) end(serial string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.probing[serial]; ok {
		close(ch)
		delete(r.probing, serial)
	}
}

// climb runs rung 1 (reconnect) and, when configured, rung 2 (reboot) on
// a phone that did not answer, probing after each; it stops at the first
// rung after which the phone answers, or when the phone is quarantined.
func (r *Recovery) climb(ctx context.Context, rd capture.Recoverable) {
	serial := rd.Serial()
	r.setLadder(serial, true)
	defer r.setLadder(serial, false)
	r.hold(serial, protocol.DeviceRecovering, "did not answer a probe; reconnecting (rung 1)")

	out, err := rd.Reconnect(ctx)
	if ctx.Err() != nil {
		return
	}
	if r.rung(ctx, serial, protocol.RungReconnect, out, err) {
		return
	}
	if r.opts.Reboot {
		r.hold(serial, protocol.DeviceRecovering, "did not answer after a reconnect; rebooting (rung 2)")
		bctx, cancel := context.WithTimeout(ctx, r.opts.BootTimeout.Duration())
		err := rd.Reboot(bctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if r.rung(ctx, serial, protocol.RungReboot, "", err) {
			return
		}
	}
	r.mu.Lock()
	p := r.phone(serial)
	if p.state == protocol.DeviceQuarantined {
		r.mu.Unlock()
		return
	}
	p.reason = fmt.Sprintf("did not answer after the ladder (%d failed probes within %s; quarantined at %d)", len(p.failures), r.opts.Window, r.opts.QuarantineAfter)
	r.inv.SetHold(serial, r.holdLocked(serial, p))
	r.mu.Unlock()
	r.changed()
	if r.opts.ProbeInterval > 0 {
		return // the idle probes go on
	}
	// No idle probes: keep probing the phone until it answers or is
	// quarantined.
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.ProbeTimeout.Duration()):
		}
		err := rd.Probe(ctx, r.opts.ProbeTimeout.Duration())
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			r.m.rungs.WithLabelValues(protocol.RungProbe, "ok").Inc()
			r.answered(serial, "probe ok")
			return
		}
		if r.probeFailed(serial, err, "while recovering") {
			return
		}
	}
}

// rung records the result of a rung, then probes the phone once it is
// listed as device again; it reports whether the ladder is over (the
// phone answers, or it is quarantined).
func (r *Recovery) rung(ctx context.Context, serial, rung, out string, err error) bool {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	r.m.rungs.WithLabelValues(rung, result).Inc()
	ev := r.log.Info()
	if err != nil {
		ev = r.log.Warn().Err(err)
	}
	ev.Str("serial", serial).Str("rung", rung).Str("result", result).Str("adb", out).Msg("phone recovery rung")
	r.mu.Lock()
	p := r.phone(serial)
	switch rung {
	case protocol.RungReconnect:
		p.rec.Reconnects++
	case protocol.RungReboot:
		if !errors.Is(err, capture.ErrCannotReboot) {
			p.rec.Reboots++
		}
	}
	note := rung + " " + result
	if errors.Is(err, capture.ErrCannotReboot) {
		note += ": " + capture.ErrCannotReboot.Error()
	}
	r.noteLocked(p, note)
	r.mu.Unlock()
	r.changed()
	if errors.Is(err, capture.ErrCannotReboot) {
		return false // nothing was done: no probe to learn from
	}

	// Wait for adb to list the phone as device again, then probe it.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd capture.Recoverable
	for rd == nil {
		if dev, ok := r.inv.Get(serial); ok && capture.Listed(dev.Info().State) {
			rd, _ = dev.(capture.Recoverable)
		}
		if rd != nil {
			break
		}
		changed := r.inv.Changed()
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return true // stopping
			}
			return r.probeFailed(serial, fmt.Errorf("%w: not listed as device again after %s", capture.ErrNotAnswering, rung), "after "+rung)
		case <-changed:
		case <-time.After(200 * time.Millisecond):
		}
	}
	perr := rd.Probe(wctx, r.opts.ProbeTimeout.Duration())
	if ctx.Err() != nil {
		return true // stopping
	}
	if perr == nil {
		r.m.rungs.WithLabelValues(protocol.RungProbe, "ok").Inc()
		r.answered(serial, "answers again after "+rung)
		return true
	}
	return r.probeFailed(serial, perr, "after "+rung)
}

// probeFailed records a failed probe and quarantines the phone when it
// failed quarantine_after times within the window; it reports whether the
// phone is quarantined.
func (r *Recovery) probeFailed(serial string, err error, when string) bool {
	r.m.rungs.WithLabelValues(protocol.RungProbe, "failed").Inc()
	now := r.now()
	r.mu.Lock()
	p := r.phone(serial)
	p.rec.ProbeFailures++
	p.failures = append(p.failures, now)
	win := r.opts.Window.Duration()
	p.failures = slices.DeleteFunc(p.failures, func(t time.Time) bool { return now.Sub(t) > win })
	r.noteLocked(p, "probe failed "+when+": "+err.Error())
	n := len(p.failures)
	quarantine := n >= r.opts.QuarantineAfter && p.state != protocol.DeviceQuarantined
	already := p.state == protocol.DeviceQuarantined
	if quarantine {
		p.state = protocol.DeviceQuarantined
		p.reason = fmt.Sprintf("%d failed probes within %s (quarantine_after %d); last: %v", n, win, r.opts.QuarantineAfter, err)
		p.rec.Quarantines++
		r.noteLocked(p, "quarantine: "+p.reason)
	}
	r.inv.SetHold(serial, r.holdLocked(serial, p))
	r.mu.Unlock()
	r.log.Warn().Err(err).Str("serial", serial).Str("rung", protocol.RungProbe).Str("when", when).Int("failures_in_window", n).Msg("phone did not answer the probe")
	if quarantine {
		r.m.rungs.WithLabelValues(protocol.RungQuarantine, "entered").Inc()
		r.m.quarantined.Inc()
		r.log.Error().Str("serial", serial).Str("rung", protocol.RungQuarantine).Int("failures_in_window", n).Dur("window", win).Msg("phone quarantined: not offered jobs until it answers a probe again")
	}
	r.changed()
	return quarantine || already
}

// answered records that the phone answers: a recovering or quarantined
// phone is offered jobs again.
func (r *Recovery) answered(serial, note string) {
	r.mu.Lock()
	p, ok := r.phones[serial]
	if !ok || p.state == "" {
		r.mu.Unlock()
		return
	}
	was := p.state
	p.state, p.reason, p.failures = "", "", nil
	r.noteLocked(p, note)
	r.inv.SetHold(serial, r.holdLocked(serial, p))
	r.mu.Unlock()
	if was == protocol.DeviceQuarantined {
		r.m.rungs.WithLabelValues(protocol.RungQuarantine, "lifted").Inc()
		r.m.quarantined.Dec()
	}
	r.log.Info().Str("serial", serial).Str("was", was).Str("note", note).Msg("phone answers again; offered jobs")
	r.changed()
}

// hold sets a phone's held state with its reason.
func (r *Recovery) hold(serial, state, reason string) {
	r.mu.Lock()
	p := r.phone(serial)
	if p.state != protocol.DeviceQuarantined {
		p.state, p.reason = state, reason
	}
	r.inv.SetHold(serial, r.holdLocked(serial, p))
	r.mu.Unlock()
	r.changed()
}

func (r *Recovery) setLadder(serial string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phone(serial).ladder = on
}

func (r *Recovery) phone(serial string) *phoneRecovery {
	p := r.phones[serial]
	if p == nil {
		p = &phoneRecovery{}
		r.phones[serial] = p
	}
	return p
}

func (r *Recovery) noteLocked(p *phoneRecovery, note string) {
	p.rec.Last = clip(note, 300)
	p.rec.LastAtUnixMilli = r.now().UnixMilli()
}

func (r *Recovery) holdLocked(serial string, p *phoneRecovery) capture.Hold {
	rec := p.rec
	return capture.Hold{State: p.state, Reason: p.reason, Recovery: &rec}
}

func (r *Recovery) changed() {
	r.mu.Lock()
	f := r.onChange
	r.mu.Unlock()
	f()
}

// look compares adb's states with the last look: phones that were listed
// as device and are now offline or gone are drops (unless the ladder
// caused them); drops within HubWindow of the first are one hub event. A
// quarantined phone that leaves adb (replugged) is lifted, to be probed
// afresh when it returns.
func (r *Recovery) look() {
	now := r.now()
	states := map[string]string{}
	for _, d := range r.inv.Devices() {
		if dev, ok := r.inv.Get(d.Serial); ok {
			states[d.Serial] = dev.Info().State
		}
	}
	var lifted []string
	r.mu.Lock()
	for serial, was := range r.last {
		st, listed := states[serial]
		if !capture.Listed(was) || (listed && capture.Listed(st)) {
			continue
		}
		p := r.phones[serial]
		if p != nil && p.ladder {
			continue
		}
		if p != nil && p.state == protocol.DeviceQuarantined {
			lifted = append(lifted, serial)
		}
		if !r.serverLost.IsZero() && now.Sub(r.serverLost) < HubWindow {
			continue // dropped with the adb server
		}
		r.drops[serial] = now
		if r.hubTimer == nil {
			r.hubTimer = time.AfterFunc(HubWindow, r.hubCheck)
		}
	}
	r.last = states
	r.mu.Unlock()
	for _, serial := range lifted {
		r.answered(serial, "left adb while quarantined (replugged or rebooted); probed again when it returns")
	}
}

// ServerLost tells the ladder that the adb server's device list was lost:
// the phones about to drop dropped with the server, not with a hub, and
// drops in the current window are no hub event.
func (r *Recovery) ServerLost() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serverLost = r.now()
	r.drops = map[string]time.Time{}
}

// hubCheck ends a hub window: two or more drops are one hub event.
func (r *Recovery) hubCheck() {
	r.mu.Lock()
	var serials []string
	for s := range r.drops {
		serials = append(serials, s)
	}
	sort.Strings(serials)
	r.drops = map[string]time.Time{}
	r.hubTimer = nil
	if len(serials) < 2 {
		r.mu.Unlock()
		return
	}
	note := fmt.Sprintf("hub drop: %d phones dropped within %s (%s)", len(serials), HubWindow, strings.Join(serials, ", "))
	for _, s := range serials {
		p := r.phone(s)
		p.rec.HubDrops++
		r.noteLocked(p, note)
		r.inv.SetHold(s, r.holdLocked(s, p))
	}
	onHub := r.onHub
	r.mu.Unlock()
	r.m.hubDrops.Inc()
	r.log.Warn().Strs("serials", serials).Int("phones", len(serials)).Dur("within", HubWindow).Str("rung", protocol.RungHubDrop).Msg("hub drop: several phones dropped at once (USB hub or its power?)")
	onHub(serials)
	r.changed()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
