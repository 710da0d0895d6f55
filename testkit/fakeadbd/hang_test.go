package fakeadbd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// shellWithin runs `adb -s SERIAL shell echo ok` and reports whether it
// answered ok before d.
func shellWithin(t *testing.T, srv *testenv.ADBServer, serial string, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := srv.Command(ctx, "-s", serial, "shell", "echo", "ok").CombinedOutput()
	return err == nil && strings.TrimSpace(string(out)) == "ok"
}

// TestRealADBHang: a hung phone stays listed as "device" by the real adb
// while its shell never answers, also after `adb reconnect` and `adb
// connect`; Recover makes it answer again. HangUntilReconnect is cured by
// the reconnect.
func TestRealADBHang(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{})
	srv.Connect(t, p.Addr(), "device")
	if !shellWithin(t, srv, p.Serial(), 10*time.Second) {
		t.Fatal("healthy phone did not answer")
	}
	p.Hang()
	if shellWithin(t, srv, p.Serial(), time.Second) {
		t.Fatal("hung phone answered")
	}
	if p.Swallowed() == 0 {
		t.Error("no stream left unanswered")
	}
	srv.WaitState(t, p.Serial(), "device")
	// adb 29 drops a network phone on reconnect; connect brings it back.
	before := p.Connects()
	if out, err := srv.Run("-s", p.Serial(), "reconnect"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	srv.Connect(t, p.Addr(), "device")
	if p.Connects() <= before {
		t.Errorf("connections %d after reconnect, want more than %d", p.Connects(), before)
	}
	if shellWithin(t, srv, p.Serial(), time.Second) {
		t.Fatal("hung phone answered after a reconnect")
	}
	p.Recover()
	if !shellWithin(t, srv, p.Serial(), 10*time.Second) {
		t.Fatal("recovered phone did not answer")
	}

	p.HangUntilReconnect()
	if shellWithin(t, srv, p.Serial(), time.Second) {
		t.Fatal("phone hung until reconnect answered")
	}
	if out, err := srv.Run("-s", p.Serial(), "reconnect"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	srv.Connect(t, p.Addr(), "device")
	if !shellWithin(t, srv, p.Serial(), 10*time.Second) {
		t.Fatal("phone hung until reconnect did not answer after the reconnect")
	}
}

// TestRealADBReboot: `adb reboot` reaches even a hung phone, which drops
// off, comes back through adb's own reconnect of a network phone, and
// answers with sys.boot_completed=1.
func TestRealADBReboot(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{})
	srv.Connect(t, p.Addr(), "device")
	p.Hang()
	if out, err := srv.Run("-s", p.Serial(), "reboot"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if p.Reboots() != 1 {
		t.Fatalf("reboots %d, want 1", p.Reboots())
	}
	testenv.Eventually(t, 30*time.Second, "the rebooted phone to answer", func() bool {
		out, err := srv.Run("-s", p.Serial(), "shell", "getprop", "sys.boot_completed")
		return err == nil && strings.TrimSpace(out) == "1"
	})
	if p.Hung() {
		t.Error("still hung after the reboot")
	}
}

// TestRealADBFlap: a flapping phone goes offline and comes back again and
// again, as the real adb lists it.
func TestRealADBFlap(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{})
	srv.Connect(t, p.Addr(), "device")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Flap(ctx, 3, 4*time.Second)
	}()
	seen := map[string]bool{}
	testenv.Eventually(t, 30*time.Second, "adb to list the flapping phone offline and then device", func() bool {
		out, err := srv.Run("devices")
		if err != nil {
			return false
		}
		for _, line := range strings.Split(out, "\n") {
			if s, st, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok && s == p.Serial() {
				if st == "offline" || seen["offline"] {
					seen[st] = true
				}
			}
		}
		return seen["offline"] && seen["device"]
	})
	<-done
	srv.WaitState(t, p.Serial(), "device")
	if p.Connects() < 3 {
		t.Errorf("connections %d, want at least 3 (one per return)", p.Connects())
	}
}

// TestRealADBHubDrop: HubDrop takes several phones off the real adb at
// once.
func TestRealADBHubDrop(t *testing.T) {
	srv := testenv.StartADB(t)
	var phones []*fakeadbd.Phone
	for range 3 {
		p := startPhone(t, fakeadbd.Options{})
		srv.Connect(t, p.Addr(), "device")
		phones = append(phones, p)
	}
	fakeadbd.HubDrop(phones...)
	for _, p := range phones {
		testenv.Eventually(t, 20*time.Second, p.Serial()+" to drop", func() bool {
			out, err := srv.Run("devices")
			return err == nil && !strings.Contains(out, p.Serial()+"\tdevice")
		})
	}
	for _, p := range phones {
		p.Replug()
		srv.Connect(t, p.Addr(), "device")
	}
}
