package capture

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

func testInventory(t *testing.T) (*Inventory, map[string]*Simulated) {
	t.Helper()
	inv := NewInventory()
	sims := map[string]*Simulated{}
	for _, o := range []SimOptions{
		{Serial: "c3", Model: "Pixel 7", Tags: []string{"eu", "rooted"}},
		{Serial: "a1", Model: "Pixel 7", Tags: []string{"eu"}},
		{Serial: "b2", Model: "Galaxy S21", Tags: []string{"us"}},
		{Serial: "d4", Model: "Galaxy S21", Tags: []string{"us", "rooted"}},
	} {
		s := NewSimulated(o)
		sims[o.Serial] = s
		if err := inv.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	sims["d4"].Unplug()
	return inv, sims
}

func TestInventorySelect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sel     protocol.DeviceSelector
		busy    []string
		want    string // serial, or "" for no match
		wantErr string
	}{
		{name: "any", sel: protocol.DeviceSelector{}, want: "a1"},
		{name: "by serial", sel: protocol.DeviceSelector{Serial: "c3"}, want: "c3"},
		{name: "by model", sel: protocol.DeviceSelector{Model: "Galaxy S21"}, want: "b2"},
		{name: "by tag", sel: protocol.DeviceSelector{Tags: []string{"rooted"}}, want: "c3"},
		{name: "by all tags", sel: protocol.DeviceSelector{Tags: []string{"eu", "rooted"}}, want: "c3"},
		{name: "model and tag", sel: protocol.DeviceSelector{Model: "Pixel 7", Tags: []string{"eu"}}, want: "a1"},
		{name: "prefers free", sel: protocol.DeviceSelector{Model: "Pixel 7"}, busy: []string{"a1"}, want: "c3"},
		{name: "busy still selectable", sel: protocol.DeviceSelector{Serial: "a1"}, busy: []string{"a1"}, want: "a1"},
		{name: "model is exact", sel: protocol.DeviceSelector{Model: "pixel 7"},
			wantErr: "no phone matches selector model=pixel 7: connected phones: a1 (model=Pixel 7 tags=eu), b2 (model=Galaxy S21 tags=us), c3 (model=Pixel 7 tags=eu,rooted), d4 (model=Galaxy S21 tags=us,rooted state=offline)"},
		{name: "unknown serial", sel: protocol.DeviceSelector{Serial: "zz"}, wantErr: "no phone matches selector serial=zz: connected phones: a1"},
		{name: "offline excluded", sel: protocol.DeviceSelector{Serial: "d4"}, wantErr: "serial=d4"},
		{name: "tag missing", sel: protocol.DeviceSelector{Model: "Galaxy S21", Tags: []string{"rooted"}}, wantErr: "model=Galaxy S21 tags=rooted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, _ := testInventory(t)
			for _, s := range tc.busy {
				if _, err := inv.Acquire(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			d, err := inv.Select(tc.sel)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrNoDevice containing %q", err, tc.wantErr)
				}
				var nd *NoDeviceError
				if !errors.As(err, &nd) || len(nd.Connected) != 4 {
					t.Fatalf("err %T does not list the connected phones", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Serial() != tc.want {
				t.Fatalf("selected %s, want %s", d.Serial(), tc.want)
			}
		})
	}
}

func TestInventoryEmpty(t *testing.T) {
	_, err := NewInventory().Select(protocol.DeviceSelector{})
	if err == nil || err.Error() != "no phone matches selector any: no phones connected" {
		t.Fatalf("err = %v", err)
	}
}

func TestInventoryAddRemove(t *testing.T) {
	inv := NewInventory()
	if err := inv.Add(NewSimulated(SimOptions{Serial: "x"})); err != nil {
		t.Fatal(err)
	}
	if err := inv.Add(NewSimulated(SimOptions{Serial: "x"})); err == nil {
		t.Fatal("duplicate serial accepted")
	}
	if got := inv.Devices(); len(got) != 1 || got[0].Serial != "x" || got[0].State != protocol.DeviceReady {
		t.Fatalf("devices = %+v", got)
	}
	inv.Remove("x")
	inv.Remove("x")
	if _, ok := inv.Get("x"); ok {
		t.Fatal("removed phone still present")
	}
}

func TestInventoryAcquireExclusive(t *testing.T) {
	inv, _ := testInventory(t)
	ctx := context.Background()
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := inv.Acquire(ctx, "a1")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			release()
			release() // idempotent
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d jobs held phone a1 at once", maxInside.Load())
	}
	if inv.Busy("a1") {
		t.Fatal("a1 still busy")
	}
}

func TestInventoryAcquireErrors(t *testing.T) {
	inv, _ := testInventory(t)
	ctx := context.Background()
	release, err := inv.Acquire(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	for _, tc := range []struct {
		name    string
		serial  string
		timeout time.Duration
		want    error
		msg     string
	}{
		{name: "unknown", serial: "zz", want: ErrNoDevice, msg: "acquire phone zz: no phone matches selector serial=zz"},
		{name: "offline", serial: "d4", want: ErrNoDevice, msg: "state=offline"},
		{name: "busy until timeout", serial: "a1", timeout: 20 * time.Millisecond, want: context.DeadlineExceeded, msg: "acquire phone a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ctx
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				c, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			_, err := inv.Acquire(c, tc.serial)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestInventoryAcquireWaits(t *testing.T) {
	inv, _ := testInventory(t)
	ctx := context.Background()
	sel := protocol.DeviceSelector{Model: "Pixel 7"}
	d1, r1, err := inv.AcquireMatching(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	d2, r2, err := inv.AcquireMatching(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if d1.Serial() != "a1" || d2.Serial() != "c3" {
		t.Fatalf("got %s, %s", d1.Serial(), d2.Serial())
	}
	got := make(chan string, 1)
	go func() {
		d, r, err := inv.AcquireMatching(ctx, sel)
		if err != nil {
			got <- err.Error()
			return
		}
		r()
		got <- d.Serial()
	}()
	select {
	case s := <-got:
		t.Fatalf("third acquire did not wait: %s", s)
	case <-time.After(20 * time.Millisecond):
	}
	r2()
	select {
	case s := <-got:
		if s != "c3" {
			t.Fatalf("third acquire got %s", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("third acquire not woken by release")
	}
	r1()

	// A waiter fails when its phone goes away.
	r, err := inv.Acquire(ctx, "b2")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := inv.Acquire(ctx, "b2"); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	inv.Remove("b2")
	select {
	case err := <-errc:
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by remove")
	}
	// The stale release must not free a phone re-added under the same serial.
	b2 := NewSimulated(SimOptions{Serial: "b2"})
	if err := inv.Add(b2); err != nil {
		t.Fatal(err)
	}
	r3, err := inv.Acquire(ctx, "b2")
	if err != nil {
		t.Fatal(err)
	}
	r()
	if !inv.Busy("b2") {
		t.Fatal("old release freed the new holder's lock")
	}
	r3()
}
