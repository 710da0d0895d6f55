package wda_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, o fakewda.Options, co wda.Options) (*fakewda.Phone, *wda.Client) {
	t.Helper()
	p, err := fakewda.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := wda.New(p.URL(), co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return p, c
}

func TestClientCalls(t *testing.T) {
	p, c := start(t, fakewda.Options{}, wda.Options{})
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || !st.Ready || st.OS.Version != fakewda.DefaultIOSVersion {
		t.Fatalf("status: %+v %v", st, err)
	}
	scr, err := c.Screen(ctx)
	if err != nil || scr.Scale != fakewda.DefaultScale || scr.ScreenSize.Width != fakewda.DefaultWidthPt {
		t.Fatalf("screen: %+v %v", scr, err)
	}
	if p.SessionID() != "" {
		t.Fatal("calls without a session created one")
	}
	if err := c.Launch(ctx, "com.example.shop"); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	if sid == "" || sid != p.SessionID() {
		t.Fatalf("client session %q, phone's %q", sid, p.SessionID())
	}
	if n, err := c.AppState(ctx, "com.example.shop"); err != nil || n != wda.AppRunningForeground {
		t.Fatalf("app state: %d %v", n, err)
	}
	app, err := c.ActiveAppInfo(ctx)
	if err != nil || app.BundleID != "com.example.shop" {
		t.Fatalf("active app: %+v %v", app, err)
	}
	if was, err := c.Terminate(ctx, "com.example.shop"); err != nil || !was {
		t.Fatalf("terminate: %v %v", was, err)
	}
	if err := c.Keys(ctx, "日本語"); err != nil || p.Typed() != "日本語" {
		t.Fatalf("keys: %v, typed %q", err, p.Typed())
	}
	if b, err := c.BatteryInfo(ctx); err != nil || b.Level != fakewda.DefaultBattery {
		t.Fatalf("battery: %+v %v", b, err)
	}
	if err := c.SetOrientation(ctx, wda.OrientationLandscape); err != nil {
		t.Fatal(err)
	}
	if o, err := c.Orientation(ctx); err != nil || o != wda.OrientationLandscape {
		t.Fatalf("orientation: %q %v", o, err)
	}
	if c.Sessions() != 1 {
		t.Fatalf("%d sessions created, want 1", c.Sessions())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.SessionID(); s != "" {
		t.Fatalf("Close left session %q", s)
	}
}

// WDA's error payloads are typed errors carrying its error and message.
func TestClientErrorPayload(t *testing.T) {
	_, c := start(t, fakewda.Options{}, wda.Options{})
	err := c.Launch(context.Background(), "com.missing.app")
	var we *wda.Error
	if !errors.As(err, &we) || we.Code != wda.CodeInvalidArgument || we.Status != http.StatusBadRequest || !strings.Contains(we.Message, "not installed") || we.Path != "/wda/apps/launch" {
		t.Fatalf("launch of a missing app: %#v", err)
	}
	if !wda.IsCode(err, wda.CodeInvalidArgument) {
		t.Fatal("IsCode does not see the code")
	}
	if err := c.PressButton(context.Background(), "power"); !wda.IsCode(err, wda.CodeUnknownError) {
		t.Fatalf("press an unknown button: %v", err)
	}
}

// A WDA restarted answers "invalid session id" for the old session: the
// client creates a new one, once, and the call goes through.
func TestClientRecreatesSession(t *testing.T) {
	p, c := start(t, fakewda.Options{}, wda.Options{})
	ctx := context.Background()
	if err := c.Tap(ctx, 10, 10); err != nil {
		t.Fatal(err)
	}
	old := c.SessionID()
	p.Drop()
	if err := c.Tap(ctx, 10, 10); !errors.Is(err, wda.ErrNotRunning) {
		t.Fatalf("tap with WDA gone: %v", err)
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := c.Tap(ctx, 10, 10); err != nil {
		t.Fatalf("tap after WDA restarted: %v", err)
	}
	if s := c.SessionID(); s == old || s != p.SessionID() || c.Sessions() != 2 {
		t.Fatalf("session %q (was %q, phone's %q), %d created", s, old, p.SessionID(), c.Sessions())
	}
	reqs := p.Requests()
	oldTap := "POST /session/" + old + "/actions"
	if n := slices.Index(reqs, oldTap); n < 0 || !slices.Contains(reqs[n+1:], oldTap) || !slices.Contains(reqs[n+1:], "POST /session") {
		t.Fatalf("requests %v: want the old session's tap refused, then a new session", reqs)
	}
}

func TestClientTransportErrors(t *testing.T) {
	p, c := start(t, fakewda.Options{}, wda.Options{Timeout: 100 * time.Millisecond})
	ctx := context.Background()
	p.Hang(true)
	if _, err := c.Status(ctx); !errors.Is(err, wda.ErrNotAnswering) || errors.Is(err, wda.ErrNotRunning) {
		t.Fatalf("status of a hung WDA: %v", err)
	}
	// The caller's own end is its error, not WDA's.
	cctx, cancel := context.WithCancelCause(ctx)
	errStop := errors.New("stopped")
	done := make(chan error, 1)
	go func() { _, err := c.Locked(cctx); done <- err }()
	testenv.Eventually(t, 10*time.Second, "the request to reach the phone", func() bool { return p.Pending() > 0 })
	cancel(errStop)
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, errStop) || errors.Is(err, wda.ErrNotAnswering) {
		t.Fatalf("cancelled call: %v", err)
	}
	p.Hang(false)
	p.Drop()
	if _, err := c.Status(ctx); !errors.Is(err, wda.ErrNotRunning) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("status with WDA gone: %v", err)
	}
}

// hostile serves what a phone that does not follow WDA could answer.
func hostile(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *wda.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(srv.Close)
	c, err := wda.New(srv.URL, wda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// Answers are read up to their bound and checked before they are used.
func TestClientBoundsAnswers(t *testing.T) {
	ctx := context.Background()
	huge := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"value":{"ready":true,"message":"%s"}}`, strings.Repeat("x", wda.MaxJSONBytes))
	})
	if _, err := huge.Status(ctx); !errors.Is(err, wda.ErrBadAnswer) || !strings.Contains(err.Error(), "over") {
		t.Fatalf("status over the bound: %v", err)
	}
	bigSource := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"value":"<A>%s</A>"}`, strings.Repeat("x", wda.MaxSourceBytes))
	})
	if _, err := bigSource.Source(ctx); !errors.Is(err, wda.ErrBadAnswer) {
		t.Fatalf("source over the bound: %v", err)
	}
	notPNG := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"value":"%s"}`, base64.StdEncoding.EncodeToString([]byte("GIF89a....")))
	})
	if _, err := notPNG.Screenshot(ctx); !errors.Is(err, wda.ErrBadAnswer) || !strings.Contains(err.Error(), "not a PNG") {
		t.Fatalf("screenshot that is no PNG: %v", err)
	}
	notJSON := hostile(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>hello</html>") })
	if _, err := notJSON.Locked(ctx); !errors.Is(err, wda.ErrBadAnswer) {
		t.Fatalf("answer that is no JSON: %v", err)
	}
	wrongShape := hostile(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"value":"yes"}`) })
	if _, err := wrongShape.Locked(ctx); !errors.Is(err, wda.ErrBadAnswer) {
		t.Fatalf("value of the wrong type: %v", err)
	}
	badSession := hostile(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"value":{"sessionId":"../x"}}`) })
	if err := badSession.Tap(ctx, 1, 1); !errors.Is(err, wda.ErrBadAnswer) {
		t.Fatalf("session id with a slash: %v", err)
	}
	plainError := hostile(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) })
	var we *wda.Error
	if _, err := plainError.Status(ctx); !errors.As(err, &we) || we.Status != http.StatusBadGateway {
		t.Fatalf("a plain HTTP error: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8100", "http://192.168.1.20:8100/", "https://wda.example:443/prefix"} {
		if _, err := wda.ParseURL(ok); err != nil {
			t.Errorf("ParseURL(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8100", "ftp://h:1", "http://", "http://u:p@h:1", "http://h:1/?q=1", "http://h:1/#f"} {
		if _, err := wda.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
}
