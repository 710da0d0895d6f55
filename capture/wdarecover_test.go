package capture_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
)

// An iPhone is on the recovery ladder: its probe asks WDA's /status and
// its session within the timeout; a hung WDA fails it with
// ErrNotAnswering (the phone stays "device" for the ladder to work on);
// its reconnect fails once the op timeout has passed, naming it, and
// the reconnect of a WDA that answers drops the WDA session and creates
// a new one, saying so;
// a WDA that refuses the connection makes the phone offline with the
// iPhone's fix; and an iPhone cannot be rebooted.
func TestWDARecoverable(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{OpTimeout: time.Second, CaptureTimeout: time.Second})
	var rd capture.Recoverable = d
	if err := rd.Probe(t.Context(), 5*time.Second); err != nil {
		t.Fatalf("probe of a WDA that answers: %v", err)
	}
	before := len(p.Requests())
	if err := rd.Probe(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	reqs := strings.Join(p.Requests()[before:], ", ")
	if !strings.Contains(reqs, "GET /status") || !strings.Contains(reqs, "GET /session/"+p.SessionID()) {
		t.Errorf("the probe asked %s, want /status and the session", reqs)
	}

	p.Hang(true)
	err := rd.Probe(t.Context(), 100*time.Millisecond)
	if !errors.Is(err, capture.ErrNotAnswering) {
		t.Fatalf("probe of a hung WDA: %v, want ErrNotAnswering", err)
	}
	if st := d.Info().State; st != protocol.DeviceReady {
		t.Errorf("a failed probe made the phone %s: the ladder, not the probe, holds it", st)
	}
	if _, err := rd.Reconnect(t.Context()); !errors.Is(err, wda.ErrNotAnswering) || !strings.Contains(err.Error(), "no answer within 1s") {
		t.Errorf("reconnect of a hung WDA: %v, want not answering within the op timeout (1s)", err)
	}
	p.Hang(false)

	old := p.SessionID()
	out, err := rd.Reconnect(t.Context())
	if err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if now := p.SessionID(); now == "" || now == old || !strings.Contains(out, "created session "+now) {
		t.Errorf("reconnect said %q; the phone's session went from %q to %q, want a new one named", out, old, now)
	}
	if err := rd.Probe(t.Context(), 5*time.Second); err != nil {
		t.Fatalf("probe after the reconnect: %v", err)
	}

	if err := rd.Reboot(t.Context()); !errors.Is(err, capture.ErrCannotReboot) {
		t.Errorf("reboot: %v, want ErrCannotReboot", err)
	}

	p.Drop()
	err = rd.Probe(t.Context(), 5*time.Second)
	var pse *capture.PhoneStateError
	if !errors.As(err, &pse) || pse.State != protocol.DeviceOffline || !strings.Contains(err.Error(), "ios runwda") {
		t.Fatalf("probe of a dropped WDA: %v, want the phone offline with the iPhone's fix", err)
	}
	if st := d.Info().State; st != protocol.DeviceOffline {
		t.Errorf("state after the dropped probe: %s", st)
	}
}

// The watcher's probe and the ladder's take turns: a probe that finds
// another one running past its timeout fails with ErrNotAnswering
// instead of sending WDA a second command.
func TestWDAProbesTakeTurns(t *testing.T) {
	p, d := startIPhone(t, fakewda.Options{}, capture.WDAOptions{})
	p.Hang(true)
	done := make(chan string)
	go func() { done <- d.Refresh(context.Background(), time.Hour) }()
	for p.Pending() == 0 {
		select {
		case st := <-done:
			t.Fatalf("the refresh ended (%s) before WDA held it", st)
		case <-time.After(10 * time.Millisecond):
		}
	}
	err := d.Probe(t.Context(), 50*time.Millisecond)
	if !errors.Is(err, capture.ErrNotAnswering) || !strings.Contains(err.Error(), "another probe") {
		t.Errorf("probe while the watcher's probe runs: %v", err)
	}
	if n := p.Pending(); n != 1 {
		t.Errorf("WDA holds %d requests, want the watcher's one", n)
	}
	p.Hang(false)
	if st := <-done; st != protocol.DeviceReady {
		t.Errorf("refresh: %s", st)
	}
}
