package capture

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/edgeagent/edgeagent/protocol"
)

// NoDeviceError reports that no usable phone matches a selector. It
// satisfies errors.Is(err, ErrNoDevice) and lists the phones that are
// connected, so the message says why nothing matched.
type NoDeviceError struct {
	Selector  protocol.DeviceSelector
	Connected []protocol.Device
}

func (e *NoDeviceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no phone matches selector %s", e.Selector.Describe())
	if len(e.Connected) == 0 {
		b.WriteString(": no phones connected")
		return b.String()
	}
	b.WriteString(": connected phones: ")
	for i, d := range e.Connected {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Serial)
		var attrs []string
		if d.Model != "" {
			attrs = append(attrs, "model="+d.Model)
		}
		if len(d.Tags) > 0 {
			attrs = append(attrs, "tags="+strings.Join(d.Tags, ","))
		}
		if d.State != protocol.DeviceReady {
			attrs = append(attrs, "state="+d.State)
		}
		if len(attrs) > 0 {
			b.WriteString(" (" + strings.Join(attrs, " ") + ")")
		}
	}
	for _, p := range e.problems() {
		b.WriteString("; " + p.Error())
	}
	return b.String()
}

// problems explains the connected phones that match the selector but for
// their state: the reason a job aimed at them cannot run, with the fix.
func (e *NoDeviceError) problems() []error {
	var out []error
	for _, d := range e.Connected {
		if d.State == protocol.DeviceReady {
			continue
		}
		if e.Selector.Fits(d) {
			out = append(out, deviceProblem(d))
		}
	}
	return out
}

// Is makes errors.Is(err, ErrNoDevice) hold.
func (e *NoDeviceError) Is(target error) bool { return target == ErrNoDevice }

// Unwrap returns the state problems of the phones that match but for their
// state, so errors.Is(err, ErrUnauthorized) holds for a job aimed at an
// unauthorized phone.
func (e *NoDeviceError) Unwrap() []error { return e.problems() }

// Inventory holds the phones attached to this PC by serial, and one lock per
// phone so that a phone runs one job at a time. It is safe for concurrent
// use.
type Inventory struct {
	mu      sync.Mutex
	devs    map[string]Device
	busy    map[string]uint64 // serial → lock id of the holder
	lockIDs uint64
	changed chan struct{} // closed and replaced on every add, remove, release
	notes   map[string]phoneNote
	held    map[string]Hold // phones the agent keeps from jobs (hold.go)
}

// NewInventory returns an empty inventory.
func NewInventory() *Inventory {
	return &Inventory{devs: map[string]Device{}, busy: map[string]uint64{}, changed: make(chan struct{}), notes: map[string]phoneNote{}}
}

// notify wakes the waiters of Acquire after a phone changed state.
func (inv *Inventory) notify() {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.signalLocked()
}

func (inv *Inventory) signalLocked() {
	close(inv.changed)
	inv.changed = make(chan struct{})
}

// Add adds a phone; a serial already present is an error.
func (inv *Inventory) Add(d Device) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if _, ok := inv.devs[d.Serial()]; ok {
		return fmt.Errorf("add phone %s: serial already present", d.Serial())
	}
	inv.devs[d.Serial()] = d
	inv.signalLocked()
	return nil
}

// Remove forgets a phone. A job holding its lock keeps its Device value;
// its release becomes a no-op, and waiters for it fail.
func (inv *Inventory) Remove(serial string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if _, ok := inv.devs[serial]; !ok {
		return
	}
	delete(inv.devs, serial)
	delete(inv.busy, serial)
	delete(inv.notes, serial)
	inv.signalLocked()
}

// Get returns the phone with serial.
func (inv *Inventory) Get(serial string) (Device, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	d, ok := inv.devs[serial]
	return d, ok
}

// Devices describes every phone, sorted by serial (for hello and heartbeat).
func (inv *Inventory) Devices() []protocol.Device {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.infosLocked()
}

// Busy reports whether a job holds the phone's lock.
func (inv *Inventory) Busy(serial string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.busy[serial] != 0
}

func (inv *Inventory) sortedLocked() []Device {
	ds := make([]Device, 0, len(inv.devs))
	for _, d := range inv.devs {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Serial() < ds[j].Serial() })
	return ds
}

func (inv *Inventory) infosLocked() []protocol.Device {
	ds := inv.sortedLocked()
	out := make([]protocol.Device, len(ds))
	for i, d := range ds {
		out[i] = inv.infoLocked(d)
	}
	return out
}

// matchLocked returns the matching phones in serial order, free ones first.
func (inv *Inventory) matchLocked(sel protocol.DeviceSelector) []Device {
	var free, taken []Device
	for _, d := range inv.sortedLocked() {
		if !sel.Matches(inv.infoLocked(d)) {
			continue
		}
		if inv.busy[d.Serial()] != 0 {
			taken = append(taken, d)
		} else {
			free = append(free, d)
		}
	}
	return append(free, taken...)
}

// Select returns a phone matching sel without locking it: the first free one
// in serial order, else the first busy one. When none matches, the error is a
// *NoDeviceError.
func (inv *Inventory) Select(sel protocol.DeviceSelector) (Device, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if m := inv.matchLocked(sel); len(m) > 0 {
		return m[0], nil
	}
	return nil, &NoDeviceError{Selector: sel, Connected: inv.infosLocked()}
}

// Acquire locks the phone with serial for one job, waiting while another job
// holds it. It fails at once when the phone is not in the inventory or not
// usable, when it goes away while waiting, and when ctx is done. release is
// idempotent.
func (inv *Inventory) Acquire(ctx context.Context, serial string) (release func(), err error) {
	_, release, err = inv.acquire(ctx, protocol.DeviceSelector{Serial: serial})
	if err != nil {
		return nil, fmt.Errorf("acquire phone %s: %w", serial, err)
	}
	return release, nil
}

// AcquireMatching locks a phone matching sel, the first free one in serial
// order, waiting while every matching phone is busy. It fails at once with a
// *NoDeviceError when no phone matches, and when ctx is done.
func (inv *Inventory) AcquireMatching(ctx context.Context, sel protocol.DeviceSelector) (Device, func(), error) {
	d, release, err := inv.acquire(ctx, sel)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire phone: %w", err)
	}
	return d, release, nil
}

func (inv *Inventory) acquire(ctx context.Context, sel protocol.DeviceSelector) (Device, func(), error) {
	for {
		if err := ctxErr(ctx); err != nil {
			return nil, nil, err
		}
		inv.mu.Lock()
		m := inv.matchLocked(sel)
		if len(m) == 0 {
			err := &NoDeviceError{Selector: sel, Connected: inv.infosLocked()}
			inv.mu.Unlock()
			return nil, nil, err
		}
		if d := m[0]; inv.busy[d.Serial()] == 0 {
			inv.lockIDs++
			id := inv.lockIDs
			inv.busy[d.Serial()] = id
			inv.mu.Unlock()
			return d, inv.releaser(d.Serial(), id), nil
		}
		changed := inv.changed
		inv.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, ctxErr(ctx)
		}
	}
}

func (inv *Inventory) releaser(serial string, id uint64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			inv.mu.Lock()
			defer inv.mu.Unlock()
			// Release only our own lock: after Remove, a new Add under the
			// same serial and a new Acquire, the lock is someone else's.
			if inv.busy[serial] == id {
				delete(inv.busy, serial)
				inv.signalLocked()
			}
		})
	}
}
