// Package browsertest drives headless Chromium (through chromedp) for the
// tests of the web dashboard (docs/ui.md). Without a browser a test is
// skipped, or fails in CI (CI=true); scripts/test-deps.sh installs Debian's
// chromium.
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// EnvChromium names a browser binary to use instead of the one found in
// PATH.
const EnvChromium = "EDGE_CHROMIUM"

// Window size of every browser the package starts, so that screenshots
// have the same size from one run to the next.
const (
	Width  = 1280
	Height = 900
)

// FindChromium returns the browser to run: $EDGE_CHROMIUM, else chromium or
// chromium-browser found in PATH.
func FindChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("find %s=%s: %w", EnvChromium, p, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("neither chromium nor chromium-browser is in PATH, and " + EnvChromium + " is not set")
}

// Browser is a headless Chromium process.
type Browser struct {
	ctx context.Context // the browser's first tab
}

// Start starts headless Chromium for the test, or skips the test (fails it
// in CI) when there is none. The browser is stopped at the test's cleanup.
func Start(t testing.TB) *Browser {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		testenv.Missing(t, "a browser for the dashboard tests: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.WindowSize(Width, Height),
		chromedp.UserDataDir(t.TempDir()),
	}
	if os.Geteuid() == 0 {
		// Chromium refuses to start its sandbox as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	var out testenv.LockedBuffer
	opts = append(opts, chromedp.CombinedOutput(&out))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium printed:\n%s", tail(out.String(), 4000))
		}
	})
	// The first run starts the browser, which the tabs' browser contexts
	// need.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return &Browser{ctx: ctx}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Tab is a browser tab in its own browser context (its own cookies), with
// the dialogs and console errors of its pages recorded.
type Tab struct {
	Ctx context.Context

	mu      sync.Mutex
	dialogs []string
	errs    []string
}

// NewTab opens a tab in a fresh browser context: tabs of one browser share
// no cookie. The tab closes at the test's cleanup. Every JavaScript dialog
// (alert, confirm, prompt) is recorded and dismissed; console errors and
// uncaught exceptions are recorded, with the browser's own errors (a
// violation of the page's Content-Security-Policy, a failed load).
func (b *Browser) NewTab(t testing.TB) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tab := &Tab{Ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			tab.mu.Lock()
			tab.dialogs = append(tab.dialogs, string(ev.Type)+": "+ev.Message)
			tab.mu.Unlock()
			// A dialog blocks the page: close it from another goroutine
			// (no command may run inside the listener).
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				tab.record("console." + string(ev.Type) + ": " + argsText(ev.Args))
			}
		case *cdplog.EventEntryAdded:
			// The browser's own errors: a violation of the page's
			// Content-Security-Policy, a failed request.
			// The icon the browser asks for on its own is not the page's.
			if e := ev.Entry; e != nil && e.Level == cdplog.EntryLevelError && !strings.HasSuffix(e.URL, "/favicon.ico") {
				tab.record(string(e.Source) + ": " + e.Text + " " + e.URL)
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				text += " " + d.Exception.Description
			}
			tab.record("exception: " + text)
		}
	})
	if err != nil {
		t.Fatalf("open a browser tab: %v", err)
	}
	return tab
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		case a.Description != "":
			parts = append(parts, a.Description)
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

func (tab *Tab) record(s string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	tab.errs = append(tab.errs, s)
}

// Dialogs returns the JavaScript dialogs the tab's pages opened so far, as
// "type: message".
func (tab *Tab) Dialogs() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.dialogs...)
}

// Errors returns the console errors, uncaught exceptions and browser
// errors (CSP violations, failed loads) of the tab's pages so far.
func (tab *Tab) Errors() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.errs...)
}

// ActionTimeout bounds Tab.Do: an action waiting for an element that never
// comes (chromedp's queries wait for it) fails the test instead of hanging.
const ActionTimeout = 60 * time.Second

// Do runs actions in the tab and fails the test on an error, naming what.
func (tab *Tab) Do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.Ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the tab's page and decodes its
// value (chromedp.Evaluate); an error fails the test. A promise is awaited.
func Eval[T any](t testing.TB, tab *Tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// WaitJS waits until the JavaScript expression is true in the tab's page,
// and fails the test naming what it waited for, with the page's address
// and text, when it is not within the time given. It asks the browser
// again and again (as testenv.Eventually does); the page's own scripts are
// not involved (a page's Content-Security-Policy forbids the eval that
// chromedp.Poll needs).
func (tab *Tab) WaitJS(t testing.TB, within time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		ok, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[bool]("Boolean("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last error %v)\n%s", within, what, err, tab.Describe())
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Describe returns the address of the tab's page and the start of its
// text, for a failure message.
func (tab *Tab) Describe() string {
	ctx, cancel := context.WithTimeout(tab.Ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	if err != nil {
		return fmt.Sprintf("(the page cannot be read: %v)", err)
	}
	if len(s) > 3000 {
		s = s[:3000] + "..."
	}
	return "page " + s
}

// Screenshot takes a full-page PNG of the tab's page, checks that it
// decodes with the window's width, and writes it to path (0644: the
// screenshots of docs/images are committed). It returns the PNG.
func (tab *Tab) Screenshot(t testing.TB, path string) []byte {
	t.Helper()
	data, err := chromedp.Run(tab.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot for %s: %v", path, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot for %s: decode png: %v", path, err)
	}
	if cfg.Width != Width || cfg.Height < 100 {
		t.Fatalf("screenshot for %s is %dx%d, want %d wide", path, cfg.Width, cfg.Height, Width)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// Cookies returns the cookies the browser would send to the tab's page.
func (tab *Tab) Cookies(t testing.TB) []*network.Cookie {
	t.Helper()
	r, err := chromedp.Call(tab.Ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatalf("read the browser's cookies: %v", err)
	}
	return r.Cookies
}
