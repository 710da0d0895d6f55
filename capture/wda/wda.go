// Package wda is a small HTTP client for WebDriverAgent (WDA), the
// XCTest runner that drives an iPhone over HTTP (port 8100 on the
// phone, reached through a forwarder such as `iproxy 8100 8100 -u UDID`).
// It speaks WDA's own routes and JSON shapes (docs/capture.md, iPhones):
// every answer is {"value": ..., "sessionId": ...}, and an error is
// {"value": {"error": "...", "message": "...", "traceback": "..."}}
// with an HTTP status of 4xx or 5xx.
//
// The phone is hostile input: every call has a timeout (the context's and
// a per-call default), and every answer is read up to a bound before it
// is decoded (MaxJSONBytes, MaxScreenshotBytes, MaxSourceBytes).
//
// Errors are typed: a WDA that refuses or drops the connection fails with
// ErrNotRunning, one that does not answer in time with ErrNotAnswering,
// and an error payload is an *Error carrying WDA's error and message. A
// call whose context ends returns the context's error (wrapping its cause).
//
// Calls that need a session (actions, keys, apps, buttons, URLs, battery)
// create one lazily (POST /session) and create it again once when WDA
// answers "invalid session id" (WDA was restarted); Close deletes it.
package wda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/uitree"
)

// Bounds and defaults.
const (
	// DefaultTimeout bounds a call whose context has no earlier deadline.
	DefaultTimeout = 20 * time.Second
	// DefaultCaptureTimeout bounds a screenshot or a source.
	DefaultCaptureTimeout = 60 * time.Second
	// MaxJSONBytes bounds the answer of every call but screenshot and
	// source.
	MaxJSONBytes = 4 << 20
	// MaxScreenshotBytes bounds a decoded screenshot (a PNG).
	MaxScreenshotBytes = 32 << 20
	// MaxSourceBytes bounds the XML of a source, as uitree reads it.
	MaxSourceBytes = uitree.MaxDumpBytes
	// MaxKeys bounds the characters of one Keys call.
	MaxKeys = 10_000
	// KeyTime is what each character adds to a Keys call's timeout (WDA
	// types a few dozen characters a second).
	KeyTime = 100 * time.Millisecond
)

// WDA's error codes (the "error" of an error payload) the client and its
// callers branch on.
const (
	CodeInvalidSession  = "invalid session id"
	CodeInvalidArgument = "invalid argument"
	CodeUnknownCommand  = "unknown command"
	CodeSessionNotMade  = "session not created"
	CodeUnknownError    = "unknown error"
)

var (
	// ErrNotRunning: nothing answers at the WDA URL (connection refused,
	// reset or closed before an answer): WDA is not running on the
	// phone, or the forwarder to it is not.
	ErrNotRunning = errors.New("WebDriverAgent not running")
	// ErrNotAnswering: WDA took the request but did not answer within
	// the call's timeout (it hangs, or the phone is asleep in a debugger).
	ErrNotAnswering = errors.New("WebDriverAgent not answering")
	// ErrBadAnswer: WDA answered something this client cannot read (not
	// JSON, too large, a value of the wrong shape).
	ErrBadAnswer = errors.New("WebDriverAgent answer not understood")
)

// Error is an error payload of WDA.
type Error struct {
	Method, Path string // the request, path without the session
	Status       int    // HTTP status
	Code         string // WDA's "error", e.g. "invalid session id"
	Message      string // WDA's "message", clipped
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("WebDriverAgent %s %s: %s (HTTP %d): %s", e.Method, e.Path, e.Code, e.Status, msg)
}

// IsCode reports whether err is an *Error with WDA error code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Options configures a Client.
type Options struct {
	// Timeout bounds each call; default DefaultTimeout.
	Timeout time.Duration
	// CaptureTimeout bounds a screenshot or a source; default
	// DefaultCaptureTimeout.
	CaptureTimeout time.Duration
}

// Client talks to one WDA. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	hc      *http.Client
	tr      *http.Transport
	timeout time.Duration
	capture time.Duration

	mu       sync.Mutex
	sid      string        // current session, "" when none
	creating chan struct{} // closed when the session being created is
	sessions int           // sessions created
}

// New returns a client of the WDA at rawURL (http://host:port, optionally
// with a path prefix). It does no I/O.
func New(rawURL string, opts Options) (*Client, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.CaptureTimeout <= 0 {
		opts.CaptureTimeout = DefaultCaptureTimeout
	}
	tr := &http.Transport{
		Proxy:               nil, // WDA is reached directly (a forwarder on this PC, or the phone on the LAN)
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{
		base: u, tr: tr, hc: &http.Client{Transport: tr, CheckRedirect: noRedirect},
		timeout: opts.Timeout, capture: opts.CaptureTimeout,
	}, nil
}

// ParseURL checks a WDA URL: http or https, a host, no query, fragment
// or user info. The error names what is wrong.
func ParseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	switch {
	case err != nil:
		return nil, fmt.Errorf("WebDriverAgent URL %q: %w", rawURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("WebDriverAgent URL %q: want http://host:port (scheme http or https)", rawURL)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("WebDriverAgent URL %q: no host", rawURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("WebDriverAgent URL %q: want http://host:port without user, query or fragment", rawURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// URL returns the WDA's base URL.
func (c *Client) URL() string { return c.base.String() }

// SessionID returns the current session's id, "" when there is none.
func (c *Client) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sid
}

// Sessions returns how many sessions the client has created.
func (c *Client) Sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions
}

// ForgetSession drops the current session without deleting it (WDA
// restarted and lost it): the next call that needs one creates one.
func (c *Client) ForgetSession() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sid = ""
}

// Close deletes the session, if any (DELETE /session/:id, best effort
// within ctx), and closes idle connections. The client may be used
// again: a call that needs a session creates one.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	sid := c.sid
	c.sid = ""
	c.mu.Unlock()
	var err error
	if sid != "" {
		err = c.do(ctx, c.timeout, http.MethodDelete, "/session/"+url.PathEscape(sid), "", nil, nil, MaxJSONBytes)
	}
	c.tr.CloseIdleConnections()
	return err
}

// CloseIdleConnections closes the connections kept for the next call.
func (c *Client) CloseIdleConnections() { c.tr.CloseIdleConnections() }

// envelope is every WDA answer.
type envelope struct {
	Value     json.RawMessage `json:"value"`
	SessionID *string         `json:"sessionId"`
}

// errorValue is the value of an error answer.
type errorValue struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// do sends one request and decodes the answer's value into out (nil:
// ignored). path is the route with the session, shown is the route as
// errors name it. limit bounds the answer's bytes.
func (c *Client) do(ctx context.Context, timeout time.Duration, method, path, shown string, body, out any, limit int64) error {
	if shown == "" {
		shown = path
	}
	if err := ctxError(ctx); err != nil {
		return fmt.Errorf("WebDriverAgent %s %s: %w", method, shown, err)
	}
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("WebDriverAgent %s %s: encode request: %w", method, shown, err)
		}
		payload = b
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	u := *c.base
	u.Path = c.base.Path + path
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(cctx, method, u.String(), rd)
		if err != nil {
			return fmt.Errorf("WebDriverAgent %s %s: %w", method, shown, err)
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json; charset=utf-8")
		}
		resp, err = c.hc.Do(req)
		if err == nil {
			break
		}
		// The connection kept from the last call was closed by WDA
		// before this request was sent on it: send it once more on a
		// new one (net/http retries this by itself for GET only).
		if attempt == 0 && cctx.Err() == nil && strings.Contains(err.Error(), "server closed idle connection") {
			continue
		}
		return c.transportError(ctx, cctx, timeout, method, shown, err)
	}
	defer resp.Body.Close()
	raw, err := readLimited(resp.Body, limit)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return fmt.Errorf("WebDriverAgent %s %s: %w: answer over %d bytes", method, shown, ErrBadAnswer, limit)
		}
		return c.transportError(ctx, cctx, timeout, method, shown, err)
	}
	var env envelope
	jerr := json.Unmarshal(raw, &env)
	if resp.StatusCode != http.StatusOK {
		e := &Error{Method: method, Path: shown, Status: resp.StatusCode}
		var ev errorValue
		if jerr == nil && json.Unmarshal(env.Value, &ev) == nil && ev.Error != "" {
			e.Code, e.Message = clip(ev.Error, 80), clip(ev.Message, 500)
		} else {
			e.Code = http.StatusText(resp.StatusCode)
			e.Message = clip(strings.TrimSpace(string(raw)), 200)
		}
		return e
	}
	if jerr != nil {
		return fmt.Errorf("WebDriverAgent %s %s: %w: not JSON: %v", method, shown, ErrBadAnswer, jerr)
	}
	// An error payload with status 200 (older WDA builds).
	if len(env.Value) > 0 && env.Value[0] == '{' {
		var ev errorValue
		if json.Unmarshal(env.Value, &ev) == nil && ev.Error != "" && ev.Message != "" {
			return &Error{Method: method, Path: shown, Status: resp.StatusCode, Code: clip(ev.Error, 80), Message: clip(ev.Message, 500)}
		}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Value, out); err != nil {
		return fmt.Errorf("WebDriverAgent %s %s: %w: value %s: %v", method, shown, ErrBadAnswer, clip(string(env.Value), 80), err)
	}
	return nil
}

// errCallTimeout is the cause of a call's own timeout.
var errCallTimeout = errors.New("call timeout")

// transportError classifies a failed request: the caller's context ended
// (its error), the call's own timeout (ErrNotAnswering), the connection
// refused or dropped (ErrNotRunning), or another failure as it is.
func (c *Client) transportError(ctx, cctx context.Context, timeout time.Duration, method, shown string, err error) error {
	if cerr := ctxError(ctx); cerr != nil {
		return fmt.Errorf("WebDriverAgent %s %s: %w", method, shown, cerr)
	}
	if context.Cause(cctx) == errCallTimeout || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("WebDriverAgent %s %s at %s: %w: no answer within %v", method, shown, c.base.Host, ErrNotAnswering, timeout)
	}
	if notRunning(err) {
		return fmt.Errorf("WebDriverAgent %s %s at %s: %w: %v", method, shown, c.base.Host, ErrNotRunning, shortNetErr(err))
	}
	return fmt.Errorf("WebDriverAgent %s %s at %s: %w", method, shown, c.base.Host, err)
}

// notRunning reports whether err means nothing serves WDA: the connection
// was refused, reset or closed before a whole answer, or the host cannot
// be reached.
func notRunning(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	case strings.Contains(err.Error(), "server closed idle connection"):
		return true
	}
	return false
}

// shortNetErr is the innermost useful part of a network error
// ("connection refused").
func shortNetErr(err error) string {
	var se syscall.Errno
	if errors.As(err, &se) {
		return se.Error()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed before an answer"
	}
	return err.Error()
}

var errTooLarge = errors.New("answer too large")

// readLimited reads r up to limit bytes; more is errTooLarge.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// ctxError is ctx's error, also wrapping its cause when that differs.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Session returns the current session's id, creating a session (POST
// /session) when there is none.
func (c *Client) Session(ctx context.Context) (string, error) { return c.session(ctx) }

// session returns the current session, creating one when there is none.
// Concurrent callers wait for one creation.
func (c *Client) session(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		if c.sid != "" {
			sid := c.sid
			c.mu.Unlock()
			return sid, nil
		}
		if ch := c.creating; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return "", fmt.Errorf("WebDriverAgent POST /session: %w", ctxError(ctx))
			}
		}
		ch := make(chan struct{})
		c.creating = ch
		c.mu.Unlock()
		sid, err := c.createSession(ctx)
		c.mu.Lock()
		c.creating = nil
		if err == nil {
			c.sid = sid
			c.sessions++
		}
		c.mu.Unlock()
		close(ch)
		return sid, err
	}
}

// createSession asks WDA for a session without an app under test (the
// agent launches apps itself).
func (c *Client) createSession(ctx context.Context) (string, error) {
	body := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{}, "firstMatch": []any{map[string]any{}}}}
	var v struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.do(ctx, c.timeout, http.MethodPost, "/session", "", body, &v, MaxJSONBytes); err != nil {
		return "", err
	}
	if v.SessionID == "" || len(v.SessionID) > 200 || strings.ContainsAny(v.SessionID, "/?#% ") {
		return "", fmt.Errorf("WebDriverAgent POST /session: %w: session id %q", ErrBadAnswer, clip(v.SessionID, 80))
	}
	return v.SessionID, nil
}

// inSession runs a call on a session route (/session/:id + path),
// creating the session when there is none and once more when WDA says it
// does not know it.
func (c *Client) inSession(ctx context.Context, timeout time.Duration, method, path string, body, out any, limit int64) error {
	for attempt := 0; ; attempt++ {
		sid, err := c.session(ctx)
		if err != nil {
			return err
		}
		err = c.do(ctx, timeout, method, "/session/"+url.PathEscape(sid)+path, path, body, out, limit)
		if attempt == 0 && IsCode(err, CodeInvalidSession) {
			c.mu.Lock()
			if c.sid == sid {
				c.sid = ""
			}
			c.mu.Unlock()
			continue
		}
		return err
	}
}

// Status is the answer of GET /status.
type Status struct {
	Ready   bool   `json:"ready"`
	Message string `json:"message"`
	State   string `json:"state"`
	OS      struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		SDKVersion string `json:"sdkVersion"`
	} `json:"os"`
	Device string `json:"device"` // "iphone", "ipad"
	Build  struct {
		Version string `json:"version"`
	} `json:"build"`
}

// Status asks whether WDA is up (GET /status; no session).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.do(ctx, c.timeout, http.MethodGet, "/status", "", nil, &s, MaxJSONBytes)
	return s, err
}

// Screen is the answer of GET /wda/screen: sizes in points and the
// scale (pixels per point).
type Screen struct {
	ScreenSize struct {
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
	} `json:"screenSize"`
	StatusBarSize struct {
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
	} `json:"statusBarSize"`
	Scale float64 `json:"scale"`
}

// Screen reads the screen's size in points and its scale (GET
// /wda/screen; no session).
func (c *Client) Screen(ctx context.Context) (Screen, error) {
	var s Screen
	err := c.do(ctx, c.timeout, http.MethodGet, "/wda/screen", "", nil, &s, MaxJSONBytes)
	return s, err
}

// DeviceInfo is the answer of GET /wda/device/info.
type DeviceInfo struct {
	Name          string `json:"name"`  // the user's name of the phone
	Model         string `json:"model"` // UIDevice.model ("iPhone")
	UUID          string `json:"uuid"`
	CurrentLocale string `json:"currentLocale"` // "ja_JP"
	TimeZone      string `json:"timeZone"`      // "Asia/Tokyo"
	IsSimulator   bool   `json:"isSimulator"`
	ThermalState  *int   `json:"thermalState"` // NSProcessInfoThermalState: 0 nominal … 3 critical
}

// DeviceInfo reads the phone's name, model, locale and time zone (GET
// /wda/device/info; no session).
func (c *Client) DeviceInfo(ctx context.Context) (DeviceInfo, error) {
	var d DeviceInfo
	err := c.do(ctx, c.timeout, http.MethodGet, "/wda/device/info", "", nil, &d, MaxJSONBytes)
	return d, err
}

// Battery states (UIDeviceBatteryState).
const (
	BatteryUnknown   = 0
	BatteryUnplugged = 1
	BatteryCharging  = 2
	BatteryFull      = 3
)

// BatteryInfo is the answer of GET /session/:id/wda/batteryInfo.
type BatteryInfo struct {
	Level float64 `json:"level"` // 0..1, -1 when unknown
	State int     `json:"state"` // Battery*
}

// BatteryInfo reads the battery's level and state (session).
func (c *Client) BatteryInfo(ctx context.Context) (BatteryInfo, error) {
	var b BatteryInfo
	err := c.inSession(ctx, c.timeout, http.MethodGet, "/wda/batteryInfo", nil, &b, MaxJSONBytes)
	return b, err
}

// Locked reports whether the screen is locked (GET /wda/locked; no
// session).
func (c *Client) Locked(ctx context.Context) (bool, error) {
	var b bool
	err := c.do(ctx, c.timeout, http.MethodGet, "/wda/locked", "", nil, &b, MaxJSONBytes)
	return b, err
}

// Unlock wakes the phone and unlocks a screen without passcode (POST
// /wda/unlock; no session). A phone with a passcode stays locked: ask
// Locked.
func (c *Client) Unlock(ctx context.Context) error {
	return c.do(ctx, c.timeout, http.MethodPost, "/wda/unlock", "", struct{}{}, nil, MaxJSONBytes)
}

// Lock locks the screen (POST /wda/lock; no session).
func (c *Client) Lock(ctx context.Context) error {
	return c.do(ctx, c.timeout, http.MethodPost, "/wda/lock", "", struct{}{}, nil, MaxJSONBytes)
}

// pngMagic starts every PNG.
var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// Screenshot returns the screen as WDA's PNG, in pixels (GET /screenshot;
// no session). An answer that is not a PNG, or over MaxScreenshotBytes,
// is ErrBadAnswer.
func (c *Client) Screenshot(ctx context.Context) ([]byte, error) {
	var s string
	// base64 of the largest PNG, with room for WDA's JSON escaping of '/'.
	limit := int64(2*base64.StdEncoding.EncodedLen(MaxScreenshotBytes) + 4096)
	if err := c.do(ctx, c.capture, http.MethodGet, "/screenshot", "", nil, &s, limit); err != nil {
		return nil, err
	}
	if base64.StdEncoding.DecodedLen(len(s)) > MaxScreenshotBytes+3 {
		return nil, fmt.Errorf("WebDriverAgent GET /screenshot: %w: screenshot over %d bytes", ErrBadAnswer, MaxScreenshotBytes)
	}
	png := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(png, []byte(s))
	if err != nil {
		return nil, fmt.Errorf("WebDriverAgent GET /screenshot: %w: not base64: %v", ErrBadAnswer, err)
	}
	png = png[:n]
	if len(png) > MaxScreenshotBytes {
		return nil, fmt.Errorf("WebDriverAgent GET /screenshot: %w: screenshot over %d bytes", ErrBadAnswer, MaxScreenshotBytes)
	}
	if !bytes.HasPrefix(png, pngMagic) {
		return nil, fmt.Errorf("WebDriverAgent GET /screenshot: %w: %d bytes that are not a PNG", ErrBadAnswer, len(png))
	}
	return png, nil
}

// Source returns the foreground app's element tree as XML (GET /source;
// no session), at most MaxSourceBytes.
func (c *Client) Source(ctx context.Context) ([]byte, error) {
	var s string
	// JSON escaping at most doubles the XML (every quote escaped).
	limit := int64(2*MaxSourceBytes + 4096)
	if err := c.do(ctx, c.capture, http.MethodGet, "/source", "", nil, &s, limit); err != nil {
		return nil, err
	}
	if len(s) > MaxSourceBytes {
		return nil, fmt.Errorf("WebDriverAgent GET /source: %w: source over %d bytes", ErrBadAnswer, MaxSourceBytes)
	}
	return []byte(s), nil
}

// PointerAction is one action of a W3C touch pointer: "pointerMove" (to
// X, Y in points over Duration), "pointerDown", "pointerUp" or "pause"
// (for Duration).
type PointerAction struct {
	Type     string
	X, Y     float64
	Duration time.Duration
}

// MarshalJSON writes the fields of the action's type, durations in
// milliseconds.
func (a PointerAction) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": a.Type}
	switch a.Type {
	case "pointerMove":
		m["x"], m["y"], m["duration"] = a.X, a.Y, a.Duration.Milliseconds()
	case "pointerDown", "pointerUp":
		m["button"] = 0
	case "pause":
		m["duration"] = a.Duration.Milliseconds()
	}
	return json.Marshal(m)
}

// Move is a pointerMove to (x, y) points over d.
func Move(x, y float64, d time.Duration) PointerAction {
	return PointerAction{Type: "pointerMove", X: x, Y: y, Duration: d}
}

// Down presses the finger.
func Down() PointerAction { return PointerAction{Type: "pointerDown"} }

// Up lifts the finger.
func Up() PointerAction { return PointerAction{Type: "pointerUp"} }

// Pause holds for d.
func Pause(d time.Duration) PointerAction { return PointerAction{Type: "pause", Duration: d} }

// tapHold is how long a tap holds the finger down.
const tapHold = 50 * time.Millisecond

// Actions performs one finger's W3C pointer actions (POST
// /session/:id/actions); the call's timeout is the default plus the
// actions' own durations.
func (c *Client) Actions(ctx context.Context, actions []PointerAction) error {
	var total time.Duration
	for _, a := range actions {
		total += max(a.Duration, 0)
	}
	body := map[string]any{"actions": []any{map[string]any{
		"type": "pointer", "id": "finger1",
		"parameters": map[string]any{"pointerType": "touch"},
		"actions":    actions,
	}}}
	return c.inSession(ctx, c.timeout+total, http.MethodPost, "/actions", body, nil, MaxJSONBytes)
}

// Tap taps at (x, y) points.
func (c *Client) Tap(ctx context.Context, x, y float64) error {
	return c.Actions(ctx, []PointerAction{Move(x, y, 0), Down(), Pause(tapHold), Up()})
}

// Swipe drags from (x1, y1) to (x2, y2) points over d; the same start and
// end hold the finger still for d (a long press).
func (c *Client) Swipe(ctx context.Context, x1, y1, x2, y2 float64, d time.Duration) error {
	if x1 == x2 && y1 == y2 {
		return c.Actions(ctx, []PointerAction{Move(x1, y1, 0), Down(), Pause(d), Up()})
	}
	return c.Actions(ctx, []PointerAction{Move(x1, y1, 0), Down(), Pause(tapHold), Move(x2, y2, d), Up()})
}

// Keys types s into the focused element (POST /session/:id/wda/keys):
// any Unicode text, at most MaxKeys characters. The timeout grows with
// the text (WDA types a few dozen characters a second).
func (c *Client) Keys(ctx context.Context, s string) error {
	n := utf8.RuneCountInString(s)
	if n > MaxKeys {
		return fmt.Errorf("WebDriverAgent keys: %d characters, over %d", n, MaxKeys)
	}
	if !utf8.ValidString(s) {
		return errors.New("WebDriverAgent keys: text is not UTF-8")
	}
	return c.inSession(ctx, c.timeout+time.Duration(n)*KeyTime, http.MethodPost, "/wda/keys", map[string]any{"value": []string{s}}, nil, MaxJSONBytes)
}

// Launch starts (or brings to the front) the app with bundleID (POST
// /session/:id/wda/apps/launch). WDA answers "invalid argument" for an
// app that is not installed.
func (c *Client) Launch(ctx context.Context, bundleID string) error {
	return c.inSession(ctx, c.timeout, http.MethodPost, "/wda/apps/launch", map[string]any{"bundleId": bundleID}, nil, MaxJSONBytes)
}

// Terminate stops the app with bundleID; it reports whether the app was
// running (POST /session/:id/wda/apps/terminate).
func (c *Client) Terminate(ctx context.Context, bundleID string) (bool, error) {
	var b bool
	err := c.inSession(ctx, c.timeout, http.MethodPost, "/wda/apps/terminate", map[string]any{"bundleId": bundleID}, &b, MaxJSONBytes)
	return b, err
}

// App states (XCUIApplicationState).
const (
	AppUnknown              = 0
	AppNotRunning           = 1
	AppRunningBackgroundSus = 2
	AppRunningBackground    = 3
	AppRunningForeground    = 4
)

// AppState returns the state of the app with bundleID (POST
// /session/:id/wda/apps/state): App*.
func (c *Client) AppState(ctx context.Context, bundleID string) (int, error) {
	var n int
	err := c.inSession(ctx, c.timeout, http.MethodPost, "/wda/apps/state", map[string]any{"bundleId": bundleID}, &n, MaxJSONBytes)
	return n, err
}

// OpenURL opens rawURL in the app that handles it (POST /session/:id/url).
func (c *Client) OpenURL(ctx context.Context, rawURL string) error {
	return c.inSession(ctx, c.timeout, http.MethodPost, "/url", map[string]any{"url": rawURL}, nil, MaxJSONBytes)
}

// Buttons of PressButton.
const (
	ButtonHome       = "home"
	ButtonVolumeUp   = "volumeUp"
	ButtonVolumeDown = "volumeDown"
)

// PressButton presses a hardware button: ButtonHome, ButtonVolumeUp or
// ButtonVolumeDown (POST /session/:id/wda/pressButton).
func (c *Client) PressButton(ctx context.Context, name string) error {
	return c.inSession(ctx, c.timeout, http.MethodPost, "/wda/pressButton", map[string]any{"name": name}, nil, MaxJSONBytes)
}

// Orientations as WDA names them.
const (
	OrientationPortrait           = "PORTRAIT"
	OrientationLandscape          = "LANDSCAPE" // landscape left: turned counter-clockwise
	OrientationLandscapeRight     = "UIA_DEVICE_ORIENTATION_LANDSCAPERIGHT"
	OrientationPortraitUpsideDown = "UIA_DEVICE_ORIENTATION_PORTRAIT_UPSIDEDOWN"
)

// Orientation reads the interface orientation (GET /orientation; no
// session): PORTRAIT or LANDSCAPE.
func (c *Client) Orientation(ctx context.Context) (string, error) {
	var s string
	err := c.do(ctx, c.timeout, http.MethodGet, "/orientation", "", nil, &s, MaxJSONBytes)
	return s, err
}

// SetOrientation turns the phone to orientation, one of Orientation*
// (POST /session/:id/orientation).
func (c *Client) SetOrientation(ctx context.Context, orientation string) error {
	return c.inSession(ctx, c.timeout, http.MethodPost, "/orientation", map[string]any{"orientation": orientation}, nil, MaxJSONBytes)
}

// AppInfo is the answer of GET /wda/activeAppInfo.
type AppInfo struct {
	BundleID string `json:"bundleId"`
	Name     string `json:"name"`
	PID      int    `json:"pid"`
}

// ActiveAppInfo names the app in the foreground (GET /wda/activeAppInfo;
// no session): com.apple.springboard on the home screen.
func (c *Client) ActiveAppInfo(ctx context.Context) (AppInfo, error) {
	var a AppInfo
	err := c.do(ctx, c.timeout, http.MethodGet, "/wda/activeAppInfo", "", nil, &a, MaxJSONBytes)
	return a, err
}

// CheckSession asks WDA whether the current session is alive (GET
// /session/:id), creating a session when there is none and once more
// when WDA no longer knows it; it returns the session's id.
func (c *Client) CheckSession(ctx context.Context) (string, error) {
	if err := c.inSession(ctx, c.timeout, http.MethodGet, "", nil, nil, MaxJSONBytes); err != nil {
		return "", err
	}
	return c.SessionID(), nil
}
