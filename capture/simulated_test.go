package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

func TestSimulatedScreenshot(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts SimOptions
		w, h int
	}{
		{"default size", SimOptions{}, 720, 1280},
		{"configured size", SimOptions{Width: 1080, Height: 2400}, 1080, 2400},
		{"tiny", SimOptions{Width: 32, Height: 48}, 32, 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSimulated(tc.opts)
			a, err := s.Screenshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(a))
			if err != nil {
				t.Fatalf("decode png: %v", err)
			}
			if b := img.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Fatalf("size %dx%d, want %dx%d", b.Dx(), b.Dy(), tc.w, tc.h)
			}
			if err := s.Tap(ctx, tc.w/2, tc.h/2); err != nil {
				t.Fatal(err)
			}
			b, err := s.Screenshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.Screenshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(a, b) || bytes.Equal(b, c) {
				t.Fatal("consecutive screenshots are identical")
			}
		})
	}
}

func TestSimulatedDeterministic(t *testing.T) {
	ctx := context.Background()
	run := func() [][]byte {
		s := NewSimulated(SimOptions{Serial: "a"})
		var out [][]byte
		_ = s.Launch(ctx, "com.example.app")
		_ = s.Tap(ctx, 100, 200)
		_ = s.Swipe(ctx, 10, 500, 600, 500, 0)
		_ = s.Text(ctx, "hello")
		shot, _ := s.Screenshot(ctx)
		dump, _ := s.UIDump(ctx)
		rec, _ := s.StartRecording(ctx)
		var mp4 bytes.Buffer
		_, _ = rec.Stop(ctx, &mp4)
		return append(out, shot, dump, mp4.Bytes())
	}
	a, b := run(), run()
	for i := range a {
		if len(a[i]) == 0 || !bytes.Equal(a[i], b[i]) {
			t.Fatalf("output %d differs between identical runs", i)
		}
	}
}

func TestSimulatedUIDump(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimOptions{})
	if err := s.Launch(ctx, "com.example.app"); err != nil {
		t.Fatal(err)
	}
	if err := s.Text(ctx, `a<b>&"c"`); err != nil {
		t.Fatal(err)
	}
	if err := s.Key(ctx, "KEYCODE_DEL"); err != nil {
		t.Fatal(err)
	}
	b, err := s.UIDump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Class   string `xml:"class,attr"`
		Text    string `xml:"text,attr"`
		Package string `xml:"package,attr"`
		Bounds  string `xml:"bounds,attr"`
		Nodes   []node `xml:"node"`
	}
	var h struct {
		XMLName xml.Name `xml:"hierarchy"`
		Nodes   []node   `xml:"node"`
	}
	if err := xml.Unmarshal(b, &h); err != nil {
		t.Fatalf("parse ui dump: %v\n%s", err, b)
	}
	if len(h.Nodes) != 1 || h.Nodes[0].Package != "com.example.app" || h.Nodes[0].Bounds != "[0,0][720,1280]" {
		t.Fatalf("root = %+v", h.Nodes)
	}
	var edit *node
	for i, n := range h.Nodes[0].Nodes {
		if n.Class == "android.widget.EditText" {
			edit = &h.Nodes[0].Nodes[i]
		}
	}
	if edit == nil || edit.Text != `a<b>&"c` {
		t.Fatalf("edit text node = %+v", edit)
	}
	if err := s.Key(ctx, "KEYCODE_HOME"); err != nil {
		t.Fatal(err)
	}
	if got := s.Foreground(); got != SimLauncher {
		t.Fatalf("foreground after home = %q", got)
	}
}

func TestSimulatedCancellation(t *testing.T) {
	cause := fencing.ErrRevoked
	s := NewSimulated(SimOptions{Serial: "slow", Latency: time.Hour})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Tap(ctx, 1, 2) }()
	time.Sleep(10 * time.Millisecond)
	cancel(cause)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
			t.Fatalf("err = %v, want context.Canceled wrapping the cause", err)
		}
		if !strings.Contains(err.Error(), "slow") {
			t.Fatalf("err %q does not name the serial", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tap did not return after cancel")
	}
	// A call on a done context never takes effect.
	if err := s.Text(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("text on cancelled ctx: %v", err)
	}
	if s.Typed() != "" {
		t.Fatal("text took effect after cancel")
	}
	for _, c := range s.History() {
		if c.Err == nil {
			t.Fatalf("op %s took effect", c.Op)
		}
	}
}

func TestSimulatedFailNextAndLatency(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimOptions{Serial: "f"})
	boom := errors.New("boom")
	s.FailNext(protocol.OpScreenshot, boom)
	s.FailNext(protocol.OpScreenshot, boom)
	for i := 0; i < 2; i++ {
		if _, err := s.Screenshot(ctx); !errors.Is(err, boom) {
			t.Fatalf("call %d: err = %v, want boom", i, err)
		}
	}
	if _, err := s.Screenshot(ctx); err != nil {
		t.Fatalf("third call: %v", err)
	}
	s.SetLatency(protocol.OpTap, 30*time.Millisecond)
	start := time.Now()
	if err := s.Tap(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("tap took %v, want at least the latency", d)
	}
	h := s.History()
	if len(h) != 4 || h[0].Err == nil || h[2].Err != nil || h[3].Op != protocol.OpTap || h[3].X != 1 {
		t.Fatalf("history = %+v", h)
	}
}

func TestSimulatedUnplug(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimOptions{Serial: "usb-7"})
	rec, err := s.StartRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Unplug()
	if s.RecordingActive() {
		t.Fatal("recording survived unplug")
	}
	if got := s.Info().State; got != "offline" {
		t.Fatalf("state = %q", got)
	}
	calls := map[string]func() error{
		"screenshot": func() error { _, err := s.Screenshot(ctx); return err },
		"ui_dump":    func() error { _, err := s.UIDump(ctx); return err },
		"tap":        func() error { return s.Tap(ctx, 0, 0) },
		"swipe":      func() error { return s.Swipe(ctx, 0, 0, 1, 1, 0) },
		"text":       func() error { return s.Text(ctx, "a") },
		"key":        func() error { return s.Key(ctx, "KEYCODE_BACK") },
		"launch":     func() error { return s.Launch(ctx, "p") },
		"record":     func() error { _, err := s.StartRecording(ctx); return err },
		"stop":       func() error { _, err := rec.Stop(ctx, io.Discard); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrUnplugged) || !strings.Contains(err.Error(), "usb-7") {
			t.Errorf("%s: err = %v, want ErrUnplugged naming usb-7", name, err)
		}
	}
	s.Plug()
	if err := s.Tap(ctx, 0, 0); err != nil {
		t.Fatalf("tap after plug: %v", err)
	}
}

func TestSimulatedRecording(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimOptions{RecordingSize: 100_000})
	rec, err := s.StartRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRecording(ctx); err == nil {
		t.Fatal("second concurrent recording started")
	}
	var buf bytes.Buffer
	n, err := rec.Stop(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if n != int64(len(b)) || n != 32+8+100_000 {
		t.Fatalf("n = %d, len = %d", n, len(b))
	}
	if string(b[4:8]) != "ftyp" || string(b[36:40]) != "mdat" || binary.BigEndian.Uint32(b[32:36]) != 100_008 {
		t.Fatalf("not an mp4 container: % x", b[:48])
	}
	if _, err := rec.Stop(ctx, io.Discard); err == nil {
		t.Fatal("second stop succeeded")
	}
	rec.Abort() // no effect after stop

	rec2, err := s.StartRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec2.Abort()
	rec2.Abort()
	if s.RecordingActive() {
		t.Fatal("recording active after abort")
	}
	aborts := 0
	for _, c := range s.History() {
		if c.Op == SimOpRecordAbort {
			aborts++
		}
	}
	if aborts != 1 {
		t.Fatalf("%d aborts in history, want 1", aborts)
	}
}

type headWriter struct {
	head []byte
	n    int64
}

func (w *headWriter) Write(p []byte) (int, error) {
	if len(w.head) < 64 {
		w.head = append(w.head, p[:min(len(p), 64-len(w.head))]...)
	}
	w.n += int64(len(p))
	return len(p), nil
}

func TestSimulatedRecordingLarge(t *testing.T) {
	// Over 4 GiB the mdat box takes a 64-bit size; nothing is held in memory.
	ctx := context.Background()
	const size = 4<<30 + 1234
	s := NewSimulated(SimOptions{RecordingSize: size})
	rec, err := s.StartRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var w headWriter
	n, err := rec.Stop(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	if n != w.n || n != 32+16+size {
		t.Fatalf("n = %d, written %d", n, w.n)
	}
	h := w.head
	if binary.BigEndian.Uint32(h[32:36]) != 1 || string(h[36:40]) != "mdat" || binary.BigEndian.Uint64(h[40:48]) != size+16 {
		t.Fatalf("bad large mdat header: % x", h[32:48])
	}

	// Stopping honours ctx between chunks.
	rec, err = s.StartRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cw := &cancelWriter{cancel: cancel, after: 1 << 20}
	if _, err := rec.Stop(cctx, cw); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop err = %v", err)
	}
	if cw.n > 2<<20 {
		t.Fatalf("kept writing %d bytes after cancel", cw.n)
	}
}

type cancelWriter struct {
	cancel func()
	after  int64
	n      int64
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.n >= w.after {
		w.cancel()
	}
	return len(p), nil
}

func BenchmarkSimulatedScreenshot(b *testing.B) {
	s := NewSimulated(SimOptions{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Screenshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSimulatedTextLikeADB: the simulated phone types what a phone reached
// over adb types and refuses what it refuses, with no trace of a refused
// text in its history.
func TestSimulatedTextLikeADB(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimOptions{Serial: "t"})
	for _, text := range []string{"plain text", "100%s off", "grüße", "日本", "tab\there"} {
		_, adbErr := InputTextCommand(text)
		simErr := s.Text(ctx, text)
		if (adbErr == nil) != (simErr == nil) {
			t.Errorf("text %q: adb error %v, simulated error %v", text, adbErr, simErr)
		}
		if simErr != nil && !strings.Contains(simErr.Error(), "not printable") && !errors.Is(simErr, ErrNoIME) {
			t.Errorf("text %q: simulated error %q does not say why", text, simErr)
		}
	}
	if h := s.History(); len(h) != 2 || h[0].Text != "plain text" || h[1].Text != "100%s off" {
		t.Errorf("history = %+v, want only the two typable texts", h)
	}
}
