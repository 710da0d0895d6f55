package fakewda_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client drives a fake iPhone with plain net/http, as WDA's docs do.
type client struct {
	t   *testing.T
	p   *fakewda.Phone
	hc  *http.Client
	sid string
}

// envelope is WDA's response: the value and the active session's id.
type envelope struct {
	Value     json.RawMessage `json:"value"`
	SessionID *string         `json:"sessionId"`
}

// wdaErr is the value of an error response.
type wdaErr struct {
	Error     string  `json:"error"`
	Message   string  `json:"message"`
	Traceback *string `json:"traceback"`
}

func start(t *testing.T, opts fakewda.Options) *client {
	t.Helper()
	p, err := fakewda.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return &client{t: t, p: p, hc: &http.Client{Transport: tr}}
}

// do sends a request and returns the status and envelope; it fails the
// test when no answer arrives.
func (c *client) do(method, path string, body any) (int, envelope) {
	c.t.Helper()
	code, env, err := c.try(context.Background(), method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, env
}

func (c *client) try(ctx context.Context, method, path string, body any) (int, envelope, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return 0, envelope{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.p.URL()+path, rd)
	if err != nil {
		return 0, envelope{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, envelope{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, envelope{}, err
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return 0, envelope{}, errors.New("not a WDA envelope: " + string(raw))
	}
	return resp.StatusCode, env, nil
}

// ok sends a request that must succeed and decodes its value into v (if
// not nil).
func (c *client) ok(method, path string, body, v any) {
	c.t.Helper()
	code, env := c.do(method, path, body)
	if code != http.StatusOK {
		c.t.Fatalf("%s %s: status %d, value %s", method, path, code, env.Value)
	}
	if v != nil {
		if err := json.Unmarshal(env.Value, v); err != nil {
			c.t.Fatalf("%s %s: value %s: %v", method, path, env.Value, err)
		}
	}
}

// fails sends a request that must fail with status and WDA error code.
func (c *client) fails(method, path string, body any, status int, code string) wdaErr {
	c.t.Helper()
	got, env := c.do(method, path, body)
	var e wdaErr
	if err := json.Unmarshal(env.Value, &e); err != nil {
		c.t.Fatalf("%s %s: value %s: %v", method, path, env.Value, err)
	}
	if got != status || e.Error != code || e.Message == "" || e.Traceback == nil {
		c.t.Fatalf("%s %s: status %d, value %s; want %d with error %q, a message and a traceback", method, path, got, env.Value, status, code)
	}
	return e
}

// session creates a session and returns its id.
func (c *client) session() string {
	c.t.Helper()
	var v struct {
		SessionID    string         `json:"sessionId"`
		Capabilities map[string]any `json:"capabilities"`
	}
	c.ok("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{}, "firstMatch": []any{map[string]any{}}}}, &v)
	if v.SessionID == "" || v.Capabilities == nil {
		c.t.Fatalf("POST /session: no sessionId or capabilities: %+v", v)
	}
	c.sid = v.SessionID
	return v.SessionID
}

// s is a path under the current session.
func (c *client) s(path string) string { return "/session/" + c.sid + path }

// waitFor waits until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

func TestStatusAndDeviceFacts(t *testing.T) {
	c := start(t, fakewda.Options{IOSVersion: "17.4", Model: "iPhone 14"})
	code, env := c.do("GET", "/status", nil)
	if code != http.StatusOK || env.SessionID != nil {
		t.Fatalf("GET /status: status %d, sessionId %v; want 200 and null", code, env.SessionID)
	}
	var st struct {
		Ready   bool   `json:"ready"`
		Message string `json:"message"`
		State   string `json:"state"`
		OS      struct {
			Name, Version, SdkVersion string
		} `json:"os"`
		IOS struct {
			IP string `json:"ip"`
		} `json:"ios"`
		Build map[string]any `json:"build"`
	}
	if err := json.Unmarshal(env.Value, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.State != "success" || st.Message == "" || st.OS.Name != "iOS" || st.OS.Version != "17.4" || st.OS.SdkVersion != "17.4" || st.IOS.IP == "" || st.Build["productBundleIdentifier"] == nil {
		t.Fatalf("GET /status value %s", env.Value)
	}

	var info struct {
		Model, Name, UUID, TimeZone, CurrentLocale string
		UserInterfaceIdiom                         *int
		IsSimulator                                *bool
	}
	c.ok("GET", "/wda/device/info", nil, &info)
	if info.UUID != fakewda.DefaultUDID || c.p.UDID() != fakewda.DefaultUDID || info.Model != "iPhone 14" || info.Name != "iPhone 14" ||
		info.TimeZone == "" || info.CurrentLocale == "" || info.UserInterfaceIdiom == nil || *info.UserInterfaceIdiom != 0 || info.IsSimulator == nil || *info.IsSimulator {
		t.Fatalf("GET /wda/device/info: %+v", info)
	}

	var scr struct {
		ScreenSize, StatusBarSize struct{ Width, Height int }
		Scale                     int
	}
	c.ok("GET", "/wda/screen", nil, &scr)
	if scr.Scale != 3 || scr.ScreenSize.Width != 393 || scr.ScreenSize.Height != 852 || scr.StatusBarSize.Width != 393 || scr.StatusBarSize.Height <= 0 {
		t.Fatalf("GET /wda/screen: %+v", scr)
	}
}

func TestSessionLifecycle(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.fails("GET", "/session/NOPE/wda/screen", nil, http.StatusNotFound, "invalid session id")

	first := c.session()
	code, env := c.do("GET", c.s(""), nil)
	if code != http.StatusOK || env.SessionID == nil || *env.SessionID != first {
		t.Fatalf("GET /session/:id: status %d, sessionId %v", code, env.SessionID)
	}
	// The answer of a route without a session names the active one.
	if _, env := c.do("GET", "/status", nil); env.SessionID == nil || *env.SessionID != first {
		t.Fatalf("GET /status with a session: sessionId %v, want %s", env.SessionID, first)
	}
	c.ok("GET", c.s("/wda/screen"), nil, nil)

	// WDA has one session: a new one ends the one before.
	second := c.session()
	if second == first {
		t.Fatal("the second session has the first one's id")
	}
	c.fails("GET", "/session/"+first+"/wda/screen", nil, http.StatusNotFound, "invalid session id")
	c.ok("GET", c.s("/wda/screen"), nil, nil)

	c.ok("DELETE", c.s(""), nil, nil)
	c.fails("GET", c.s("/wda/screen"), nil, http.StatusNotFound, "invalid session id")
	if _, env := c.do("GET", "/status", nil); env.SessionID != nil {
		t.Fatalf("GET /status after DELETE: sessionId %v, want null", *env.SessionID)
	}
	c.fails("POST", "/session", map[string]any{}, http.StatusInternalServerError, "session not created")

	// A bundleId capability launches the app; one not installed makes no
	// session.
	caps := func(bundle string) map[string]any {
		return map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{"bundleId": bundle}}}
	}
	c.fails("POST", "/session", caps(capture.SimMissingPrefix+"app"), http.StatusInternalServerError, "session not created")
	c.ok("POST", "/session", caps(capture.SimShop), nil)
	if fg := c.p.Screen().Foreground(); fg != capture.SimShop || c.p.SessionID() == "" {
		t.Fatalf("a session with bundleId %s: foreground %s, session %q", capture.SimShop, fg, c.p.SessionID())
	}
}

func TestUnknownRoutesAndBadJSON(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.fails("GET", "/no/such/route", nil, http.StatusNotFound, "unknown command")
	// Like WDA, /wda/homescreen is served without a session only and
	// /actions with one only.
	c.session()
	c.fails("POST", c.s("/wda/homescreen"), nil, http.StatusNotFound, "unknown command")
	c.fails("POST", "/actions", map[string]any{"actions": []any{}}, http.StatusNotFound, "unknown command")
	c.fails("DELETE", "/status", nil, http.StatusNotFound, "unknown command")
	c.fails("POST", c.s("/wda/keys"), "{not json", http.StatusBadRequest, "invalid argument")
	c.fails("POST", c.s("/wda/keys"), map[string]any{"value": "not a list"}, http.StatusBadRequest, "invalid argument")
	c.fails("POST", c.s("/actions"), map[string]any{"actions": []any{map[string]any{"type": "pointer", "actions": []any{map[string]any{"type": "pointerMove"}}}}}, http.StatusBadRequest, "invalid argument")
	c.fails("POST", c.s("/url"), map[string]any{}, http.StatusBadRequest, "invalid argument")
}

// screenshot returns the decoded screenshot's size.
func (c *client) screenshotSize(path string) (w, h int, raw []byte) {
	c.t.Helper()
	var b64 string
	c.ok("GET", path, nil, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		c.t.Fatalf("GET %s: value is not base64: %v", path, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		c.t.Fatalf("GET %s: value is not a PNG: %v", path, err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy(), raw
}

func TestScreenshotIsInPixels(t *testing.T) {
	for _, tc := range []struct {
		opts fakewda.Options
		w, h int
	}{
		{fakewda.Options{}, 393 * 3, 852 * 3},
		{fakewda.Options{Scale: 2, WidthPt: 375, HeightPt: 667}, 750, 1334},
	} {
		c := start(t, tc.opts)
		if w, h, _ := c.screenshotSize("/screenshot"); w != tc.w || h != tc.h {
			t.Errorf("%+v: GET /screenshot is %dx%d, want %dx%d", tc.opts, w, h, tc.w, tc.h)
		}
		c.session()
		if w, h, _ := c.screenshotSize(c.s("/screenshot")); w != tc.w || h != tc.h {
			t.Errorf("%+v: GET /session/:id/screenshot is %dx%d, want %dx%d", tc.opts, w, h, tc.w, tc.h)
		}
	}
}

// pixel returns the colour of a PNG's pixel at (x, y).
func pixel(t *testing.T, pngBytes []byte, x, y int) [4]uint32 {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatal(err)
	}
	r, g, b, a := img.At(x, y).RGBA()
	return [4]uint32{r, g, b, a}
}

// xnode is an element of WDA's source XML.
type xnode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Kids    []xnode    `xml:",any"`
}

func (n *xnode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *xnode) has(name string) bool {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return true
		}
	}
	return false
}

// find returns the first element (depth first) for which match holds.
func (n *xnode) find(match func(*xnode) bool) *xnode {
	if match(n) {
		return n
	}
	for i := range n.Kids {
		if f := n.Kids[i].find(match); f != nil {
			return f
		}
	}
	return nil
}

func (c *client) source(path string) *xnode {
	c.t.Helper()
	var src string
	c.ok("GET", path, nil, &src)
	var root xnode
	if err := xml.Unmarshal([]byte(src), &root); err != nil {
		c.t.Fatalf("GET %s: not XML: %v\n%s", path, err, src)
	}
	return &root
}

// centre is the centre of an element in points.
func centre(t *testing.T, n *xnode) (x, y int) {
	t.Helper()
	var r [4]int
	for i, a := range []string{"x", "y", "width", "height"} {
		if err := json.Unmarshal([]byte(n.attr(a)), &r[i]); err != nil {
			t.Fatalf("%s=%q: %v", a, n.attr(a), err)
		}
	}
	return r[0] + r[2]/2, r[1] + r[3]/2
}

func TestSourceIsXCUITreeInPoints(t *testing.T) {
	c := start(t, fakewda.Options{Catalogue: []capture.SimProduct{{Name: "抹茶ラテ", Price: "税込 1,408円"}, {Name: "ほうじ茶", Price: "¥980"}}})
	c.session()
	c.ok("POST", c.s("/wda/apps/launch"), map[string]any{"bundleId": capture.SimShop}, nil)
	root := c.source(c.s("/source?format=xml"))
	if root.XMLName.Local != "XCUIElementTypeApplication" || root.attr("type") != "XCUIElementTypeApplication" || root.attr("name") != "Shop" ||
		len(root.Kids) != 1 || root.Kids[0].XMLName.Local != "XCUIElementTypeWindow" {
		t.Fatalf("root %s name %q with %d children; want the Shop application holding a window", root.XMLName.Local, root.attr("name"), len(root.Kids))
	}
	price := root.find(func(n *xnode) bool { return n.attr("name") == "price" })
	if price == nil {
		t.Fatal("no element named price")
	}
	if price.XMLName.Local != "XCUIElementTypeStaticText" || price.attr("type") != "XCUIElementTypeStaticText" ||
		price.attr("label") != "税込 1,408円" || price.attr("value") != "税込 1,408円" ||
		price.attr("enabled") != "true" || price.attr("visible") != "true" || price.attr("accessible") != "true" || !price.has("index") {
		t.Fatalf("price element %s %v", price.XMLName.Local, price.Attrs)
	}
	field := root.find(func(n *xnode) bool { return n.attr("type") == "XCUIElementTypeTextField" })
	button := root.find(func(n *xnode) bool { return n.attr("type") == "XCUIElementTypeButton" })
	if field == nil || field.attr("name") != "input" || button == nil {
		t.Fatalf("no text field named input or no button in the shop's source")
	}

	// The source's points times the scale are where the simulated phone
	// shows the price, in pixels.
	x, y := centre(t, price)
	tree, err := c.p.Screen().UIDump(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Index(tree, []byte(`resource-id="com.example.shop:id/price"`))
	if want < 0 {
		t.Fatal("the simulated phone shows no price")
	}
	var l, tp, r, b int
	bounds := tree[bytes.Index(tree[want:], []byte(`bounds="`))+want:]
	if _, err := fmt.Sscanf(string(bounds), `bounds="[%d,%d][%d,%d]"`, &l, &tp, &r, &b); err != nil {
		t.Fatal(err)
	}
	if px, py := x*3, y*3; px < l || px >= r || py < tp || py >= b {
		t.Fatalf("price centre (%d,%d) points = (%d,%d) pixels, outside its pixel bounds [%d,%d][%d,%d]", x, y, px, py, l, tp, r, b)
	}

	// The source is served without a session too; other formats are not.
	if root := c.source("/source"); root.attr("name") != "Shop" {
		t.Fatalf("GET /source: root name %q", root.attr("name"))
	}
	c.fails("GET", "/source?format=yaml", nil, http.StatusBadRequest, "invalid argument")
}

// tap is the W3C pointer actions of a tap at (x, y) points.
func tap(x, y int, hold int) map[string]any {
	return map[string]any{"actions": []any{map[string]any{
		"type": "pointer", "id": "finger1", "parameters": map[string]any{"pointerType": "touch"},
		"actions": []any{
			map[string]any{"type": "pointerMove", "duration": 0, "x": x, "y": y},
			map[string]any{"type": "pointerDown", "button": 0},
			map[string]any{"type": "pause", "duration": hold},
			map[string]any{"type": "pointerUp", "button": 0},
		},
	}}}
}

// launcherIcon returns the centre, in points, of the home screen's icon
// labelled label.
func (c *client) launcherIcon(label string) (x, y int) {
	c.t.Helper()
	root := c.source("/source")
	if root.attr("name") != "SpringBoard" {
		c.t.Fatalf("the home screen's source is %q's", root.attr("name"))
	}
	icon := root.find(func(n *xnode) bool { return n.attr("label") == label })
	if icon == nil {
		c.t.Fatalf("no %s icon on the home screen", label)
	}
	return centre(c.t, icon)
}

func TestTapOnIconLaunchesApp(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.session()
	x, y := c.launcherIcon("Shop")
	c.ok("POST", c.s("/actions"), tap(x, y, 50), nil)
	if fg := c.p.Screen().Foreground(); fg != capture.SimShop {
		t.Fatalf("foreground after tapping the Shop icon: %s", fg)
	}
	h := c.p.Screen().History()
	if last := h[len(h)-1]; last.Op != protocol.OpTap || last.X != x*3 || last.Y != y*3 {
		t.Fatalf("last operation %+v, want a tap at (%d,%d) pixels", last, x*3, y*3)
	}
	var app struct {
		BundleID         string `json:"bundleId"`
		Name             *string
		Pid              int
		ProcessArguments struct {
			Args []string          `json:"args"`
			Env  map[string]string `json:"env"`
		} `json:"processArguments"`
	}
	c.ok("GET", "/wda/activeAppInfo", nil, &app)
	if app.BundleID != capture.SimShop || app.Name == nil || app.Pid <= 0 || app.ProcessArguments.Args == nil || app.ProcessArguments.Env == nil {
		t.Fatalf("GET /wda/activeAppInfo: %+v", app)
	}
	var state int
	c.ok("POST", c.s("/wda/apps/state"), map[string]any{"bundleId": capture.SimShop}, &state)
	if state != 4 {
		t.Fatalf("state of the tapped app: %d, want 4 (running in the foreground)", state)
	}
}

func TestLongPressAndSwipe(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.session()
	c.ok("POST", c.s("/actions"), tap(100, 200, 800), nil)
	h := c.p.Screen().History()
	if last := h[len(h)-1]; last.Op != protocol.OpSwipe || last.X != 300 || last.Y != 600 || last.X2 != 300 || last.Y2 != 600 || last.Duration < 800*time.Millisecond {
		t.Fatalf("long press reached the phone as %+v, want a press held in place at (300,600) pixels for 800ms", last)
	}
	swipe := map[string]any{"actions": []any{map[string]any{
		"type": "pointer", "id": "finger1", "parameters": map[string]any{"pointerType": "touch"},
		"actions": []any{
			map[string]any{"type": "pointerMove", "duration": 0, "x": 200, "y": 700},
			map[string]any{"type": "pointerDown", "button": 0},
			map[string]any{"type": "pointerMove", "duration": 300, "x": 200, "y": 150, "origin": "viewport"},
			map[string]any{"type": "pointerUp", "button": 0},
		},
	}}}
	c.ok("POST", c.s("/actions"), swipe, nil)
	h = c.p.Screen().History()
	if last := h[len(h)-1]; last.Op != protocol.OpSwipe || last.X != 600 || last.Y != 2100 || last.X2 != 600 || last.Y2 != 450 || last.Duration != 300*time.Millisecond {
		t.Fatalf("swipe reached the phone as %+v, want (600,2100) to (600,450) pixels in 300ms", last)
	}
}

func TestKeysTypeUnicode(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.session()
	c.ok("POST", c.s("/wda/apps/launch"), map[string]any{"bundleId": capture.SimShop}, nil)
	c.ok("POST", c.s("/wda/keys"), map[string]any{"value": []string{"抹", "茶"}}, nil)
	c.ok("POST", c.s("/wda/keys"), map[string]any{"value": []string{"ラテ 2本"}}, nil)
	if got := c.p.Typed(); got != "抹茶ラテ 2本" {
		t.Fatalf("Typed() = %q", got)
	}
	if got := c.p.Screen().Typed(); got != "抹茶ラテ 2本" {
		t.Fatalf("the app's text field holds %q", got)
	}
	field := c.source(c.s("/source")).find(func(n *xnode) bool { return n.attr("name") == "input" })
	if field == nil || field.attr("value") != "抹茶ラテ 2本" {
		t.Fatalf("the source's text field: %+v", field)
	}
}

func TestLockAndUnlock(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.session()
	var locked bool
	if c.ok("GET", "/wda/locked", nil, &locked); locked {
		t.Fatal("a fresh phone is locked")
	}
	_, _, home := c.screenshotSize("/screenshot")
	x, y := c.launcherIcon("Shop")

	c.ok("POST", "/wda/lock", nil, nil)
	if c.ok("GET", c.s("/wda/locked"), nil, &locked); !locked {
		t.Fatal("/wda/locked after /wda/lock: false")
	}
	w, h, lockScreen := c.screenshotSize("/screenshot")
	if w != 393*3 || h != 852*3 {
		t.Fatalf("the locked phone's screenshot is %dx%d", w, h)
	}
	// Where the home screen shows the Shop icon, the lock screen does not.
	if a, b := pixel(t, home, x*3, y*3), pixel(t, lockScreen, x*3, y*3); a == b {
		t.Fatalf("the lock screen shows the home screen's colour %v at the Shop icon", a)
	}
	if root := c.source("/source"); root.attr("name") != "SpringBoard" || root.find(func(n *xnode) bool { return n.attr("label") == "Shop" }) != nil {
		t.Fatal("the locked phone's source shows the home screen's icons")
	}
	var app struct{ BundleID string }
	if c.ok("GET", "/wda/activeAppInfo", nil, &app); app.BundleID != fakewda.SpringBoard {
		t.Fatalf("active app of a locked phone: %s", app.BundleID)
	}
	// Actions do not reach the app behind the lock screen.
	before := len(c.p.Screen().History())
	c.ok("POST", c.s("/actions"), tap(x, y, 50), nil)
	if fg := c.p.Screen().Foreground(); fg != capture.SimLauncher || len(c.p.Screen().History()) != before {
		t.Fatalf("a tap on the lock screen reached the phone (foreground %s)", fg)
	}
	c.fails("POST", c.s("/wda/keys"), map[string]any{"value": []string{"x"}}, http.StatusBadRequest, "invalid element state")

	c.ok("POST", c.s("/wda/unlock"), nil, nil)
	if c.ok("GET", "/wda/locked", nil, &locked); locked {
		t.Fatal("/wda/locked after /wda/unlock without a passcode: true")
	}
	c.ok("POST", c.s("/actions"), tap(x, y, 50), nil)
	if fg := c.p.Screen().Foreground(); fg != capture.SimShop {
		t.Fatalf("a tap on the unlocked phone's Shop icon: foreground %s", fg)
	}
}

func TestUnlockWithPasscodeStaysLocked(t *testing.T) {
	c := start(t, fakewda.Options{Passcode: true})
	c.p.SetLocked(true)
	c.fails("POST", "/wda/unlock", nil, http.StatusInternalServerError, "unknown error")
	var locked bool
	if c.ok("GET", "/wda/locked", nil, &locked); !locked || !c.p.Locked() {
		t.Fatal("a phone with a passcode unlocked through /wda/unlock")
	}
	c.p.SetLocked(false)
	if c.ok("GET", "/wda/locked", nil, &locked); locked {
		t.Fatal("/wda/locked after SetLocked(false): true")
	}
}

func TestAppsLaunchTerminateState(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.session()
	e := c.fails("POST", c.s("/wda/apps/launch"), map[string]any{"bundleId": capture.SimMissingPrefix + "app"}, http.StatusBadRequest, "invalid argument")
	if !strings.Contains(e.Message, "is not installed") {
		t.Fatalf("launching a missing app: %q", e.Message)
	}
	state := func(bundle string) int {
		var s int
		c.ok("POST", c.s("/wda/apps/state"), map[string]any{"bundleId": bundle}, &s)
		return s
	}
	if s := state(capture.SimShop); s != 1 {
		t.Fatalf("state of an app never launched: %d, want 1", s)
	}
	c.ok("POST", c.s("/wda/apps/launch"), map[string]any{"bundleId": capture.SimShop, "arguments": []string{"-debug"}, "environment": map[string]string{"LANG": "ja"}}, nil)
	if s := state(capture.SimShop); s != 4 || c.p.Screen().Foreground() != capture.SimShop {
		t.Fatalf("state after launch: %d, foreground %s", s, c.p.Screen().Foreground())
	}
	var app struct {
		BundleID         string `json:"bundleId"`
		ProcessArguments struct {
			Args []string          `json:"args"`
			Env  map[string]string `json:"env"`
		} `json:"processArguments"`
	}
	c.ok("GET", c.s("/wda/activeAppInfo"), nil, &app)
	if app.BundleID != capture.SimShop || len(app.ProcessArguments.Args) != 1 || app.ProcessArguments.Args[0] != "-debug" || app.ProcessArguments.Env["LANG"] != "ja" {
		t.Fatalf("GET /wda/activeAppInfo after launch: %+v", app)
	}

	c.ok("POST", "/wda/homescreen", nil, nil)
	if s := state(capture.SimShop); s != 3 || c.p.Screen().Foreground() != capture.SimLauncher {
		t.Fatalf("state after /wda/homescreen: %d, foreground %s", s, c.p.Screen().Foreground())
	}
	var was bool
	if c.ok("POST", c.s("/wda/apps/terminate"), map[string]any{"bundleId": capture.SimShop}, &was); !was {
		t.Fatal("terminating a running app answered false")
	}
	if s := state(capture.SimShop); s != 1 {
		t.Fatalf("state after terminate: %d, want 1", s)
	}
	if c.ok("POST", c.s("/wda/apps/terminate"), map[string]any{"bundleId": capture.SimShop}, &was); was {
		t.Fatal("terminating an app not running answered true")
	}
}

func TestOpenURLButtonsBatteryOrientation(t *testing.T) {
	c := start(t, fakewda.Options{Battery: 0.42})
	c.session()
	c.ok("POST", c.s("/url"), map[string]any{"url": "https://example.com/item/1"}, nil)
	if c.p.Screen().URL() != "https://example.com/item/1" || c.p.Screen().Foreground() != capture.SimBrowser {
		t.Fatalf("after POST /url: url %q, foreground %s", c.p.Screen().URL(), c.p.Screen().Foreground())
	}
	c.ok("POST", c.s("/wda/pressButton"), map[string]any{"name": "home"}, nil)
	if fg := c.p.Screen().Foreground(); fg != capture.SimLauncher {
		t.Fatalf("after pressing home: foreground %s", fg)
	}
	c.ok("POST", c.s("/wda/pressButton"), map[string]any{"name": "volumeUp"}, nil)
	h := c.p.Screen().History()
	if last := h[len(h)-1]; last.Op != protocol.OpKey || !strings.Contains(last.Key, "VOLUME_UP") {
		t.Fatalf("volumeUp reached the phone as %+v", last)
	}
	c.fails("POST", c.s("/wda/pressButton"), map[string]any{"name": "power"}, http.StatusInternalServerError, "unknown error")

	var bat struct {
		Level float64
		State int
	}
	if c.ok("GET", c.s("/wda/batteryInfo"), nil, &bat); bat.Level != 0.42 || bat.State != fakewda.BatteryUnplugged {
		t.Fatalf("GET /wda/batteryInfo: %+v", bat)
	}
	c.p.SetBattery(1, fakewda.BatteryFull)
	if c.ok("GET", c.s("/wda/batteryInfo"), nil, &bat); bat.Level != 1 || bat.State != fakewda.BatteryFull {
		t.Fatalf("GET /wda/batteryInfo after SetBattery: %+v", bat)
	}

	var o string
	if c.ok("GET", c.s("/orientation"), nil, &o); o != "PORTRAIT" {
		t.Fatalf("orientation of a fresh phone: %q", o)
	}
	c.ok("POST", c.s("/orientation"), map[string]any{"orientation": "LANDSCAPE"}, nil)
	if c.ok("GET", "/orientation", nil, &o); o != "LANDSCAPE" || c.p.Screen().Orientation() != protocol.OrientationLandscape {
		t.Fatalf("orientation after setting LANDSCAPE: %q (phone %s)", o, c.p.Screen().Orientation())
	}
}

// TestHangReleasedWhenClientGivesUp: a request held while the phone hangs
// is let go unanswered when its client gives up; it reached the phone
// (Received) but was never answered (Requests).
func TestHangReleasedWhenClientGivesUp(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.p.Hang(true)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.try(ctx, "GET", "/wda/locked", nil)
		errc <- err
	}()
	waitFor(t, "the request to be held", func() bool { return c.p.Pending() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a held request ended with %v, want the client's cancellation", err)
	}
	waitFor(t, "the held request to be let go", func() bool { return c.p.Pending() == 0 })
	c.p.Hang(false)
	c.ok("GET", "/status", nil, nil)
	for _, r := range c.p.Requests() {
		if r == "GET /wda/locked" {
			t.Fatalf("the request the client gave up on was answered: %v", c.p.Requests())
		}
	}
	// It reached the phone all the same: Received lists it, then the
	// one answered, in the order they arrived.
	got := c.p.Received()
	if len(got) != 2 || got[0].Method+" "+got[0].Path != "GET /wda/locked" || got[1].Method+" "+got[1].Path != "GET /status" ||
		got[0].At.IsZero() || got[1].At.Before(got[0].At) {
		t.Fatalf("Received() = %+v, want the held GET /wda/locked, then GET /status", got)
	}
}

func TestHangAnsweredWhenReleased(t *testing.T) {
	c := start(t, fakewda.Options{})
	c.p.Hang(true)
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, _, err := c.try(t.Context(), "GET", "/wda/locked", nil)
		done <- result{code, err}
	}()
	waitFor(t, "the request to be held", func() bool { return c.p.Pending() == 1 })
	select {
	case r := <-done:
		t.Fatalf("a request was answered while the phone hangs: %+v", r)
	default:
	}
	c.p.Hang(false)
	if r := <-done; r.err != nil || r.code != http.StatusOK {
		t.Fatalf("the held request after Hang(false): %+v", r)
	}
	if got := c.p.Requests(); len(got) != 1 || got[0] != "GET /wda/locked" {
		t.Fatalf("Requests() = %v", got)
	}
}

func TestCloseLetsHeldRequestsGo(t *testing.T) {
	p, err := fakewda.Start(fakewda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &client{t: t, p: p, hc: &http.Client{Transport: tr}}
	p.Hang(true)
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.try(t.Context(), "GET", "/status", nil)
		errc <- err
	}()
	waitFor(t, "the request to be held", func() bool { return p.Pending() == 1 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("a request held when the phone closed got an answer")
	}
}

func TestDropRefusesAndRestoreForgetsSessions(t *testing.T) {
	c := start(t, fakewda.Options{})
	old := c.session()
	url := c.p.URL()
	c.p.Drop()
	_, _, err := c.try(t.Context(), "GET", "/status", nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("GET /status while dropped: %v, want connection refused", err)
	}
	if err := c.p.Restore(); err != nil {
		t.Fatal(err)
	}
	if c.p.URL() != url {
		t.Fatalf("restored at %s, was %s", c.p.URL(), url)
	}
	c.ok("GET", "/status", nil, nil)
	c.fails("GET", "/session/"+old+"/wda/screen", nil, http.StatusNotFound, "invalid session id")
	c.session()
	c.ok("GET", c.s("/wda/screen"), nil, nil)
}
