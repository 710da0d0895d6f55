package capture

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// ADBOptions configures the phones reached through the adb server.
type ADBOptions struct {
	// Address is the adb server's host:port. Default: 127.0.0.1 and the
	// port of ANDROID_ADB_SERVER_PORT, else 127.0.0.1:5037.
	Address string
	// ADBPath is the adb binary run once as `adb start-server` when no
	// server answers. Default "adb" from PATH.
	ADBPath string
	// NoStart: never start a server (the agent's own server, ADBServer,
	// is started and supervised apart).
	NoStart bool
	// OnServerLost, when set, is called when the server's device list is
	// lost (the server died), before its phones are dropped.
	OnServerLost func()
	// Tags are the selector tags of each phone, by serial.
	Tags map[string][]string
	// Serials, when not empty, are the only phones offered: any other
	// phone the adb server lists is left alone (logged once).
	Serials []string
	// Connect are network phones (host:port) connected with `adb connect`
	// whenever the adb server does not list them, as is every network
	// phone the server listed once and the network phones among Serials
	// (docs/capture.md, Network phones).
	Connect []string
	// ConnectBackoff is the first wait between two connects of a network
	// phone that does not answer, doubled after each failure up to
	// ConnectBackoffMax; defaults DefaultConnectBackoff and
	// DefaultConnectBackoffMax.
	ConnectBackoff, ConnectBackoffMax time.Duration
	// Log receives phone arrivals, departures and state changes.
	Log zerolog.Logger
	// OpTimeout bounds tap, swipe (plus its duration), text, key and
	// launch; default DefaultOpTimeout.
	OpTimeout time.Duration
	// CaptureTimeout bounds a screenshot, a UI dump, and starting or
	// stopping a recording; default DefaultCaptureTimeout.
	CaptureTimeout time.Duration
	// RecordLimit is screenrecord's --time-limit; default 180 s (the most
	// that Android 10 and older allow).
	RecordLimit time.Duration
	// ScreenshotMode is ScreenshotAuto (default), ScreenshotRaw or
	// ScreenshotPNG.
	ScreenshotMode string
}

func (o ADBOptions) validate() error {
	switch o.ScreenshotMode {
	case "", ScreenshotAuto, ScreenshotRaw, ScreenshotPNG:
		return nil
	}
	return fmt.Errorf("screenshot mode %q: want auto, raw or png", o.ScreenshotMode)
}

func (o ADBOptions) withDefaults() ADBOptions {
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.CaptureTimeout <= 0 {
		o.CaptureTimeout = DefaultCaptureTimeout
	}
	if o.RecordLimit <= 0 {
		o.RecordLimit = DefaultRecordLimit
	}
	if o.ScreenshotMode == "" {
		o.ScreenshotMode = ScreenshotAuto
	}
	if o.ConnectBackoff <= 0 {
		o.ConnectBackoff = DefaultConnectBackoff
	}
	if o.ConnectBackoffMax < o.ConnectBackoff {
		o.ConnectBackoffMax = max(DefaultConnectBackoffMax, o.ConnectBackoff)
	}
	return o
}

// NewADBInventory returns an inventory that follows the adb server's device
// list live (host:track-devices): phones are added as adb lists them, with
// their state (device, offline, unauthorized, no permissions), model
// (getprop ro.product.model, read when a phone becomes usable) and tags, and
// removed when adb no longer lists them. When no server answers it starts
// one with `adb start-server`; it fails when that does not work. stop ends
// the tracking and waits for it; the inventory keeps its last state.
func NewADBInventory(ctx context.Context, opts ADBOptions) (*Inventory, func(), error) {
	if err := opts.validate(); err != nil {
		return nil, nil, fmt.Errorf("open adb inventory: %w", err)
	}
	opts = opts.withDefaults()
	c := adb.New(adb.Options{Addr: opts.Address, ADBPath: opts.ADBPath, NoStart: opts.NoStart})
	v, err := c.Version(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("open adb inventory: %w", err)
	}
	opts.Log.Info().Str("adb_server", c.Addr()).Int("adb_version", v).Msg("tracking phones through the adb server")
	inv := NewInventory()
	t := &tracker{c: c, opts: opts, inv: inv, devs: map[string]*trackedPhone{}, ignored: map[string]bool{}, network: map[string]*netPhone{}, wake: make(chan struct{}, 1)}
	for _, s := range append(slices.Clone(opts.Connect), opts.Serials...) {
		t.rememberNetwork(s)
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.wg.Go(func() { t.run(tctx) })
	t.wg.Go(func() { t.connectLoop(tctx) })
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			t.wg.Wait()
		})
	}
	return inv, stop, nil
}

type tracker struct {
	c    *adb.Client
	opts ADBOptions
	inv  *Inventory
	wg   sync.WaitGroup

	mu      sync.Mutex
	devs    map[string]*trackedPhone
	ignored map[string]bool      // phones listed by adb but not in Serials
	network map[string]*netPhone // network phones connected again when not listed (netconnect.go)
	wake    chan struct{}        // nudges connectLoop after a drop
}

type trackedPhone struct {
	d      *ADBDevice
	gen    int    // raised on every adb state change
	listed string // state as adb lists it ("" when not listed)
	// kept: a network phone the adb server dropped, kept in the inventory
	// (state offline, with the reason) while the agent connects it again.
	kept bool
}

func (t *tracker) run(ctx context.Context) {
	backoff := 250 * time.Millisecond
	for {
		start := time.Now()
		err := t.c.TrackDevices(ctx, func(ds []adb.DeviceEntry) { t.update(ctx, ds) })
		if ctx.Err() != nil {
			return
		}
		// The server went away: nothing is reachable until it is back.
		if t.opts.OnServerLost != nil {
			t.opts.OnServerLost()
		}
		t.update(ctx, nil)
		if time.Since(start) > 10*time.Second {
			backoff = 250 * time.Millisecond
		}
		t.opts.Log.Warn().Err(err).Dur("retry_in", backoff).Msg("lost the adb server's device list")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// update applies one full device list.
func (t *tracker) update(ctx context.Context, ds []adb.DeviceEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.opts.Serials) > 0 {
		offered := ds[:0:0]
		for _, e := range ds {
			if slices.Contains(t.opts.Serials, e.Serial) {
				offered = append(offered, e)
				continue
			}
			if !t.ignored[e.Serial] {
				t.ignored[e.Serial] = true
				t.opts.Log.Info().Str("serial", e.Serial).Str("state", e.State).Msg("phone not listed in devices; not offered")
			}
		}
		ds = offered
	}
	listed := map[string]string{}
	for _, e := range ds {
		listed[e.Serial] = e.State
		t.rememberNetwork(e.Serial)
	}
	for serial, tp := range t.devs {
		if _, ok := listed[serial]; ok || tp.listed == "" {
			continue
		}
		tp.listed = ""
		tp.gen++
		tp.d.setState(stateGone)
		t.inv.Remove(serial)
		t.opts.Log.Info().Str("serial", serial).Msg("phone gone")
		t.dropped(serial, tp)
	}
	for _, e := range ds {
		tp := t.devs[e.Serial]
		if tp == nil {
			tp = &trackedPhone{d: newADBDevice(t.c, e.Serial, t.opts)}
			tp.d.state = adb.StateConnecting
			t.devs[e.Serial] = tp
		}
		if tp.listed == e.State {
			continue
		}
		wasListed := tp.listed != "" || tp.kept
		if tp.kept {
			tp.kept = false
			tp.d.setNetNote("")
		}
		if e.State == adb.StateDevice {
			t.listedAgain(e.Serial)
		}
		tp.listed = e.State
		tp.gen++
		t.opts.Log.Info().Str("serial", e.Serial).Str("state", e.State).Msg("phone state")
		if e.State == adb.StateDevice {
			// Usable once its model and features are known.
			tp.d.setState(adb.StateConnecting)
			gen := tp.gen
			t.wg.Go(func() { t.probe(ctx, tp, gen) })
		} else {
			tp.d.setState(e.State)
		}
		if !wasListed {
			if err := t.inv.Add(tp.d); err != nil {
				t.opts.Log.Error().Err(err).Msg("add phone to inventory")
			}
		} else {
			t.inv.notify()
		}
	}
}

// probe reads the model and features of a phone that became usable and
// then marks it usable, unless its state changed meanwhile.
func (t *tracker) probe(ctx context.Context, tp *trackedPhone, gen int) {
	var err error
	for attempt := range 3 {
		if err = tp.d.probe(ctx); err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tp.gen != gen {
		return
	}
	if err != nil {
		t.opts.Log.Warn().Str("serial", tp.d.serial).Err(err).Msg("read phone model; phone kept with an empty model")
	}
	tp.d.setState(protocol.DeviceReady)
	t.inv.notify()
	info := tp.d.Info()
	t.opts.Log.Info().Str("serial", info.Serial).Str("model", info.Model).Strs("tags", info.Tags).Msg("phone ready")
}
