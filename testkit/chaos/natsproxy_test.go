package chaos

import (
	"bufio"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// hmsg409 is a micro error reply as the NATS server delivers it.
var hmsg409 = func() string {
	hdr := "NATS/1.0\r\nNats-Service-Error: stale\r\nNats-Service-Error-Code: 409\r\n\r\n"
	return fmt.Sprintf("HMSG _INBOX.a.x.1 7 %d %d\r\n%s\r\n", len(hdr), len(hdr), hdr)
}()

func TestReadFrame(t *testing.T) {
	for _, tc := range []struct {
		wire            string
		op, subj, reply string
		payload         string
		code            int
	}{
		{"PUB edge.v1.coord.a.renew _INBOX.a.x.1 5\r\nhello\r\n", "PUB", "edge.v1.coord.a.renew", "_INBOX.a.x.1", "hello", 0},
		{"pub foo 0\r\n\r\n", "PUB", "foo", "", "", 0},
		{"HPUB foo bar 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", "HPUB", "foo", "bar", "hi", 0},
		{"MSG edge.v1.agent.a.assign 3 _INBOX.c.1 2\r\n{}\r\n", "MSG", "edge.v1.agent.a.assign", "_INBOX.c.1", "{}", 0},
		{hmsg409, "HMSG", "_INBOX.a.x.1", "", "", 409},
		{"PING\r\n", "PING", "", "", "", 0},
		{"INFO {\"server_id\":\"x\",\"headers\":true}\r\n", "INFO", "", "", "", 0},
	} {
		f, err := readFrame(bufio.NewReader(strings.NewReader(tc.wire)))
		if err != nil {
			t.Errorf("%q: %v", tc.wire, err)
			continue
		}
		if f.op != tc.op || f.subject != tc.subj || f.reply != tc.reply || string(f.payload) != tc.payload || f.errorCode() != tc.code {
			t.Errorf("%q: got op %s subject %q reply %q payload %q code %d", tc.wire, f.op, f.subject, f.reply, f.payload, f.errorCode())
		}
		if string(f.raw) != tc.wire {
			t.Errorf("%q: raw %q, want the frame as it came", tc.wire, f.raw)
		}
	}
	for _, bad := range []string{"PUB foo\r\n", "PUB foo x\r\nab\r\n", "HPUB foo 5 2\r\nabcde\r\n", "MSG foo 1 10\r\nshort\r\n"} {
		if _, err := readFrame(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// testControl is a LinkControl whose faults a test sets directly.
type testControl struct {
	pauseGate
	mu   sync.Mutex
	msg  MsgFaults
	hook func(dir Dir, rec *FrameRecord) Verdict
}

func (c *testControl) Msg() MsgFaults {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msg
}

func (c *testControl) Hook(_ *NATSLink, dir Dir, rec *FrameRecord) Verdict {
	c.mu.Lock()
	h := c.hook
	c.mu.Unlock()
	if h == nil {
		return Verdict{}
	}
	return h(dir, rec)
}

func (c *testControl) Rand() float64 { return 0 }

func TestNATSLink(t *testing.T) {
	ns := testenv.NATS(t)
	ctl := &testControl{}
	rec := NewRecorder(1, Plan{}, time.Now())
	l, err := NewNATSLink("a/1", ns.Addr().String(), ctl, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	server, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	var mu sync.Mutex
	got := map[string]int{}
	if _, err := server.Subscribe("echo.>", func(m *nats.Msg) {
		mu.Lock()
		got[string(m.Data)]++
		mu.Unlock()
		_ = m.Respond(m.Data)
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.Flush(); err != nil {
		t.Fatal(err)
	}
	client, err := nats.Connect(l.URL(), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	seen := func(data string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[data]
	}

	// Through the link, requests and replies work.
	if m, err := client.Request("echo.1", []byte("one"), 2*time.Second); err != nil || string(m.Data) != "one" {
		t.Fatalf("request through the link: %v %v", m, err)
	}

	// Paused: nothing gets through until the pause ends, then everything in order.
	ctl.pause()
	if err := client.Publish("echo.2", []byte("held")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if seen("held") != 0 {
		t.Fatal("a message got through a paused link")
	}
	ctl.unpause()
	testenv.Eventually(t, 10*time.Second, "the held message", func() bool { return seen("held") == 1 })

	// Duplication: every message arrives twice.
	ctl.mu.Lock()
	ctl.msg = MsgFaults{DupProb: 1, DupLate: 10 * time.Millisecond}
	ctl.mu.Unlock()
	if err := client.Publish("echo.3", []byte("twice")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the duplicate", func() bool { return seen("twice") == 2 })
	ctl.mu.Lock()
	ctl.msg = MsgFaults{}
	ctl.mu.Unlock()

	// A hook can drop a message.
	ctl.mu.Lock()
	ctl.hook = func(dir Dir, rec *FrameRecord) Verdict {
		return Verdict{Drop: dir == ToServer && rec.Subject == "echo.4"}
	}
	ctl.mu.Unlock()
	_ = client.Publish("echo.4", []byte("dropped"))
	_ = client.Publish("echo.5", []byte("kept"))
	testenv.Eventually(t, 10*time.Second, "the message after the dropped one", func() bool { return seen("kept") == 1 })
	if seen("dropped") != 0 {
		t.Fatal("a dropped message got through")
	}

	// Killed: nothing more gets through, not even after the client retries.
	l.Kill()
	_ = client.Publish("echo.6", []byte("after kill"))
	time.Sleep(150 * time.Millisecond)
	if seen("after kill") != 0 {
		t.Fatal("a message got through a killed link")
	}

	h := rec.History()
	var pubs, dups, dropped int
	for _, f := range h.Frames {
		if f.Dir != ToServer {
			continue
		}
		pubs++
		if f.Copy {
			dups++
		}
		if f.Note == "dropped" {
			dropped++
		}
		if f.Link != "a/1" || f.Read.IsZero() {
			t.Errorf("frame %+v: link or read time missing", f)
		}
	}
	if dups != 1 || dropped != 1 || pubs < 6 {
		t.Errorf("recorded %d messages to the server, %d duplicates, %d dropped; want ≥6, 1, 1", pubs, dups, dropped)
	}
}
