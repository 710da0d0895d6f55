package fakewda

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// Error codes of WDA's FBCommandStatus.m with their HTTP statuses.
const (
	errInvalidSession  = "invalid session id"    // 404
	errUnknownCommand  = "unknown command"       // 404
	errInvalidArgument = "invalid argument"      // 400
	errElementState    = "invalid element state" // 400
	errSessionNotMade  = "session not created"   // 500
	errUnknown         = "unknown error"         // 500
	errCapture         = "unable to capture screen"
)

// SpringBoard is the bundle id of the home screen and the lock screen.
const SpringBoard = "com.apple.springboard"

// maxBody bounds a request body.
const maxBody = 1 << 20

// request is one routed request.
type request struct {
	r       *http.Request
	session bool // reached under /session/:id/
	args    map[string]any
}

type handler func(p *Phone, q *request) (any, *wdaError)

// wdaError is an error status of FBCommandStatus.m.
type wdaError struct {
	status  int
	code    string
	message string
}

func fail(status int, code, format string, a ...any) *wdaError {
	return &wdaError{status: status, code: code, message: fmt.Sprintf(format, a...)}
}

func invalidArgument(format string, a ...any) *wdaError {
	return fail(http.StatusBadRequest, errInvalidArgument, format, a...)
}

func unknownError(format string, a ...any) *wdaError {
	return fail(http.StatusInternalServerError, errUnknown, format, a...)
}

// route says where a route is served: without a session (/path), with one
// (/session/:id/path), or both, as WDA's FBRoute withoutSession does.
type route struct {
	h                    handler
	sessionless, session bool
}

// routes are the routes the fake serves, by "METHOD /path".
var routes = map[string]route{
	"GET /status":              {h: (*Phone).status, sessionless: true},
	"POST /session":            {h: (*Phone).createSession, sessionless: true},
	"GET /screenshot":          {h: (*Phone).screenshot, sessionless: true, session: true},
	"GET /source":              {h: (*Phone).source, sessionless: true, session: true},
	"POST /actions":            {h: (*Phone).actions, session: true},
	"POST /wda/keys":           {h: (*Phone).keys, session: true},
	"POST /wda/apps/launch":    {h: (*Phone).launch, session: true},
	"POST /wda/apps/activate":  {h: (*Phone).activate, session: true},
	"POST /wda/apps/terminate": {h: (*Phone).terminate, session: true},
	"POST /wda/apps/state":     {h: (*Phone).appState, session: true},
	"POST /url":                {h: (*Phone).openURL, session: true},
	"GET /wda/activeAppInfo":   {h: (*Phone).activeAppInfo, sessionless: true, session: true},
	"GET /wda/batteryInfo":     {h: (*Phone).batteryInfo, session: true},
	"GET /wda/device/info":     {h: (*Phone).deviceInfo, sessionless: true, session: true},
	"GET /wda/screen":          {h: (*Phone).screenInfo, sessionless: true, session: true},
	"GET /window/size":         {h: (*Phone).windowSize, sessionless: true, session: true},
	"GET /wda/locked":          {h: (*Phone).isLocked, sessionless: true, session: true},
	"POST /wda/lock":           {h: (*Phone).lock, sessionless: true, session: true},
	"POST /wda/unlock":         {h: (*Phone).unlock, sessionless: true, session: true},
	"POST /wda/homescreen":     {h: (*Phone).homescreen, sessionless: true},
	"POST /wda/pressButton":    {h: (*Phone).pressButton, session: true},
	"GET /orientation":         {h: (*Phone).orientation, sessionless: true, session: true},
	"POST /orientation":        {h: (*Phone).setOrientation, sessionless: true, session: true},
	"POST /timeouts":           {h: func(*Phone, *request) (any, *wdaError) { return nil, nil }, session: true},
}

// route answers a request the way WDA's router does: a route under
// /session/:id/ needs the active session's id; anything else is an
// unknown command.
func (p *Phone) route(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	q := &request{r: r}
	var rt route
	var found bool
	if rest, ok := strings.CutPrefix(path, "/session/"); ok {
		id, sub, _ := strings.Cut(rest, "/")
		key := r.Method + " /" + sub
		if sub == "" {
			key = r.Method + " "
		}
		switch {
		case key == "GET " || key == "DELETE ":
			rt, found = route{h: (*Phone).sessionInfo, session: true}, true
			if key == "DELETE " {
				rt.h = (*Phone).deleteSession
			}
		default:
			rt, found = routes[key]
			found = found && rt.session
		}
		if found && !p.hasSession(id) {
			p.reply(w, nil, fail(http.StatusNotFound, errInvalidSession, "Session does not exist"))
			return
		}
		q.session = true
	} else {
		rt, found = routes[r.Method+" "+path]
		found = found && rt.sessionless
	}
	if !found {
		p.reply(w, nil, fail(http.StatusNotFound, errUnknownCommand, "Unhandled endpoint: %s with parameters {\n}", r.URL.Path))
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		switch {
		case err != nil:
			p.reply(w, nil, invalidArgument("read the request body: %v", err))
			return
		case len(body) > maxBody:
			p.reply(w, nil, invalidArgument("the request body is over %d bytes", maxBody))
			return
		case len(strings.TrimSpace(string(body))) > 0:
			if err := json.Unmarshal(body, &q.args); err != nil {
				p.reply(w, nil, invalidArgument("the request body is not a JSON object: %v", err))
				return
			}
		}
	}
	v, werr := rt.h(p, q)
	p.reply(w, v, werr)
}

func (p *Phone) hasSession(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return id != "" && id == p.session
}

// reply writes WDA's response envelope (FBResponsePayload.m): the value,
// or for an error {"error", "message", "traceback"}, and the active
// session's id or null.
func (p *Phone) reply(w http.ResponseWriter, v any, werr *wdaError) {
	p.mu.Lock()
	var sid any
	if p.session != "" {
		sid = p.session
	}
	p.mu.Unlock()
	status := http.StatusOK
	if werr != nil {
		status = werr.status
		v = map[string]any{"error": werr.code, "message": werr.message, "traceback": ""}
	}
	b, err := marshal(map[string]any{"value": v, "sessionId": sid})
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = marshal(map[string]any{"value": map[string]any{"error": errUnknown, "message": err.Error(), "traceback": ""}, "sessionId": sid})
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// marshal encodes v as WDA does: "<", ">" and "&" stay as they are (the
// source is XML in a JSON string).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// str returns the string argument name, "" when absent or not a string.
func (q *request) str(name string) string {
	s, _ := q.args[name].(string)
	return s
}

// status answers GET /status (FBSessionCommands.m handleGetStatus).
func (p *Phone) status(*request) (any, *wdaError) {
	return map[string]any{
		"ready":   true,
		"message": "WebDriverAgent is ready to accept commands",
		"state":   "success",
		"os": map[string]any{
			"name": "iOS", "version": p.opts.IOSVersion, "sdkVersion": sdkVersion(p.opts.IOSVersion),
			"testmanagerdVersion": 28,
		},
		"ios": map[string]any{"ip": "127.0.0.1"},
		"build": map[string]any{
			"time":                    "Jan  1 2026 00:00:00",
			"productBundleIdentifier": "com.facebook.WebDriverAgentRunner",
			"version":                 "9.0.0",
		},
		"device": "iphone",
	}, nil
}

// sdkVersion is the major.minor of an iOS version.
func sdkVersion(v string) string {
	parts := strings.SplitN(v, ".", 3)
	return strings.Join(parts[:min(len(parts), 2)], ".")
}

// capabilities are the session's capabilities (FBSessionCommands.m
// currentCapabilities).
func (p *Phone) capabilities() map[string]any {
	return map[string]any{"device": "iphone", "sdkVersion": p.opts.IOSVersion}
}

// createSession answers POST /session: W3C capabilities under
// "capabilities" ({"alwaysMatch": {...}, "firstMatch": [{...}]}); a bundleId
// capability launches that app. Like WDA, a new session ends the one
// before it.
func (p *Phone) createSession(q *request) (any, *wdaError) {
	caps, ok := q.args["capabilities"].(map[string]any)
	if !ok {
		return nil, fail(http.StatusInternalServerError, errSessionNotMade, "'capabilities' is mandatory to create a new session")
	}
	merged := map[string]any{}
	if always, ok := caps["alwaysMatch"].(map[string]any); ok {
		for k, v := range always {
			merged[k] = v
		}
	}
	if first, ok := caps["firstMatch"].([]any); ok && len(first) > 0 {
		if m, ok := first[0].(map[string]any); ok {
			for k, v := range m {
				merged[k] = v
			}
		}
	}
	p.mu.Lock()
	p.session = ""
	p.mu.Unlock()
	if bundle, _ := merged["bundleId"].(string); bundle != "" {
		if !p.screen.Installed(bundle) {
			return nil, fail(http.StatusInternalServerError, errSessionNotMade,
				"Cannot launch %s application. Make sure the correct bundle identifier has been provided in capabilities and check the device log for possible crash report occurrences", bundle)
		}
		args, _ := merged["arguments"].([]any)
		env, _ := merged["environment"].(map[string]any)
		if werr := p.launchApp(q.r.Context(), bundle, args, env); werr != nil {
			return nil, werr
		}
	}
	id := newSessionID()
	p.mu.Lock()
	p.session = id
	p.sessions++
	p.mu.Unlock()
	return map[string]any{"sessionId": id, "capabilities": p.capabilities()}, nil
}

// newSessionID returns an upper-case UUID, as WDA's session ids are.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

func (p *Phone) sessionInfo(*request) (any, *wdaError) {
	return map[string]any{"sessionId": p.SessionID(), "capabilities": p.capabilities()}, nil
}

func (p *Phone) deleteSession(*request) (any, *wdaError) {
	p.mu.Lock()
	p.session = ""
	p.mu.Unlock()
	return nil, nil
}

// screenshot answers GET /screenshot: a base64 PNG in pixels.
func (p *Phone) screenshot(q *request) (any, *wdaError) {
	var png []byte
	var err error
	if p.Locked() {
		png, err = p.lockScreenPNG()
	} else {
		png, err = p.screen.Screenshot(q.r.Context())
	}
	if err != nil {
		return nil, fail(http.StatusInternalServerError, errCapture, "%v", err)
	}
	return base64.StdEncoding.EncodeToString(png), nil
}

// source answers GET /source: the XML of the foreground app (format=xml,
// the default); json and description are not served.
func (p *Phone) source(q *request) (any, *wdaError) {
	if f := q.r.URL.Query().Get("format"); f != "" && !strings.EqualFold(f, "xml") {
		return nil, invalidArgument("Unknown source format '%s'. Only (xml) source formats are supported.", f)
	}
	if p.Locked() {
		return p.lockScreenSource(), nil
	}
	dump, err := p.screen.UIDump(q.r.Context())
	if err != nil {
		return nil, unknownError("Cannot get 'xml' source of the current application: %v", err)
	}
	src, err := p.xcuiSource(dump)
	if err != nil {
		return nil, unknownError("Cannot get 'xml' source of the current application: %v", err)
	}
	return src, nil
}

// keys answers POST /wda/keys {"value": ["h", "i"]}: the strings joined
// are typed into the focused field. "\n" (or the W3C Enter key U+E007)
// presses Enter, "\b" (or Backspace U+E003) deletes.
func (p *Phone) keys(q *request) (any, *wdaError) {
	list, ok := q.args["value"].([]any)
	if !ok {
		return nil, invalidArgument("'value' is mandatory: an array of strings")
	}
	var b strings.Builder
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, invalidArgument("value[%d] is not a string", i)
		}
		b.WriteString(s)
	}
	text := b.String()
	if p.Locked() {
		return nil, fail(http.StatusBadRequest, errElementState, "Keyboard is not present: the screen is locked")
	}
	ctx := q.r.Context()
	var run strings.Builder
	flush := func() error {
		if run.Len() == 0 {
			return nil
		}
		defer run.Reset()
		return p.screen.Text(ctx, run.String())
	}
	for _, r := range text {
		var key string
		switch r {
		case '\n', '\r', '\uE007', '\uE006':
			key = "KEYCODE_ENTER"
		case '\b', '\u007f', '\uE003', '\uE017':
			key = "KEYCODE_DEL"
		default:
			run.WriteRune(r)
			continue
		}
		if err := flush(); err != nil {
			return nil, fail(http.StatusBadRequest, errElementState, "%v", err)
		}
		if err := p.screen.Key(ctx, key); err != nil {
			return nil, fail(http.StatusBadRequest, errElementState, "%v", err)
		}
	}
	if err := flush(); err != nil {
		return nil, fail(http.StatusBadRequest, errElementState, "%v", err)
	}
	p.mu.Lock()
	p.typed += text
	p.mu.Unlock()
	return nil, nil
}

// bundleID is the bundle id of a simulated phone's package: the launcher
// is SpringBoard.
func bundleID(pkg string) string {
	if pkg == capture.SimLauncher {
		return SpringBoard
	}
	return pkg
}

// notInstalled is the error of launching an app that is not installed
// (FBXCTestDaemonsProxy.m: FBApplicationMissingException, an invalid
// argument).
func notInstalled(bundle string) *wdaError {
	return invalidArgument("The application '%s' is not installed on the device under test", bundle)
}

// launch answers POST /wda/apps/launch {"bundleId", "arguments",
// "environment"}: the app comes to the foreground, launched with them
// when it was not running.
func (p *Phone) launch(q *request) (any, *wdaError) {
	bundle := q.str("bundleId")
	if bundle == "" {
		return nil, invalidArgument("'bundleId' is mandatory")
	}
	args, _ := q.args["arguments"].([]any)
	env, _ := q.args["environment"].(map[string]any)
	return nil, p.launchApp(q.r.Context(), bundle, args, env)
}

// activate answers POST /wda/apps/activate {"bundleId"}.
func (p *Phone) activate(q *request) (any, *wdaError) {
	bundle := q.str("bundleId")
	if bundle == "" {
		return nil, invalidArgument("'bundleId' is mandatory")
	}
	return nil, p.launchApp(q.r.Context(), bundle, nil, nil)
}

func (p *Phone) launchApp(ctx context.Context, bundle string, args []any, env map[string]any) *wdaError {
	if bundle == SpringBoard {
		if err := p.screen.Key(ctx, "KEYCODE_HOME"); err != nil {
			return unknownError("%v", err)
		}
		return nil
	}
	if !p.screen.Installed(bundle) {
		return notInstalled(bundle)
	}
	p.mu.Lock()
	running := p.running[bundle]
	if !running {
		la := launchArgs{Args: []string{}, Env: map[string]string{}}
		for _, a := range args {
			if s, ok := a.(string); ok {
				la.Args = append(la.Args, s)
			}
		}
		for k, v := range env {
			if s, ok := v.(string); ok {
				la.Env[k] = s
			}
		}
		p.launches[bundle] = la
	}
	p.mu.Unlock()
	if p.screen.Foreground() == bundle {
		return nil
	}
	if err := p.screen.Launch(ctx, bundle); err != nil {
		var missing *capture.AppNotInstalledError
		if errors.As(err, &missing) {
			return notInstalled(bundle)
		}
		return unknownError("%v", err)
	}
	p.noteForeground()
	return nil
}

// noteForeground records the foreground app as running.
func (p *Phone) noteForeground() {
	fg := p.screen.Foreground()
	p.mu.Lock()
	defer p.mu.Unlock()
	if fg != capture.SimLauncher && !p.running[fg] {
		p.running[fg] = true
		if _, ok := p.launches[fg]; !ok {
			p.launches[fg] = launchArgs{Args: []string{}, Env: map[string]string{}}
		}
	}
}

// terminate answers POST /wda/apps/terminate {"bundleId"}: true when the
// app was running.
func (p *Phone) terminate(q *request) (any, *wdaError) {
	bundle := q.str("bundleId")
	if bundle == "" {
		return nil, invalidArgument("'bundleId' is mandatory")
	}
	p.noteForeground()
	p.mu.Lock()
	was := p.running[bundle]
	delete(p.running, bundle)
	delete(p.launches, bundle)
	p.mu.Unlock()
	if !was {
		return false, nil
	}
	if err := p.screen.ForceStop(q.r.Context(), bundle); err != nil {
		return nil, unknownError("%v", err)
	}
	return true, nil
}

// XCUIApplicationState values of /wda/apps/state.
const (
	appNotRunning        = 1
	appRunningBackground = 3
	appRunningForeground = 4
)

func (p *Phone) appState(q *request) (any, *wdaError) {
	bundle := q.str("bundleId")
	if bundle == "" {
		return nil, invalidArgument("'bundleId' is mandatory")
	}
	p.noteForeground()
	if bundleID(p.screen.Foreground()) == bundle {
		return appRunningForeground, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if bundle == SpringBoard || p.running[bundle] {
		return appRunningBackground, nil
	}
	return appNotRunning, nil
}

// openURL answers POST /url {"url"}: the phone opens it as it opens a
// VIEW intent's (capture.Simulated.OpenURL).
func (p *Phone) openURL(q *request) (any, *wdaError) {
	u := q.str("url")
	if u == "" {
		return nil, invalidArgument("URL is required")
	}
	if err := p.screen.OpenURL(q.r.Context(), u); err != nil {
		if errors.Is(err, capture.ErrInvalidStep) {
			return nil, unknownError("'%s' is not a valid URL", u)
		}
		return nil, unknownError("%v", err)
	}
	p.noteForeground()
	return nil, nil
}

// activeAppInfo answers GET /wda/activeAppInfo.
func (p *Phone) activeAppInfo(*request) (any, *wdaError) {
	bundle := SpringBoard
	if !p.Locked() {
		bundle = bundleID(p.screen.Foreground())
	}
	p.noteForeground()
	p.mu.Lock()
	la, ok := p.launches[bundle]
	p.mu.Unlock()
	if !ok {
		la = launchArgs{Args: []string{}, Env: map[string]string{}}
	}
	return map[string]any{"pid": pid(bundle), "bundleId": bundle, "name": "", "processArguments": la}, nil
}

// pid is an app's process id: the same for the same app.
func pid(bundle string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(bundle))
	return 100 + int(h.Sum32()%30000)
}

func (p *Phone) batteryInfo(*request) (any, *wdaError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return map[string]any{"level": p.level, "state": p.state}, nil
}

func (p *Phone) deviceInfo(*request) (any, *wdaError) {
	return map[string]any{
		"currentLocale":      "ja_JP",
		"timeZone":           "Asia/Tokyo",
		"name":               p.opts.Model,
		"model":              p.opts.Model,
		"uuid":               p.opts.UDID,
		"userInterfaceIdiom": 0,
		"userInterfaceStyle": "light",
		"isSimulator":        false,
		"thermalState":       0,
	}, nil
}

// statusBarPt is the status bar's height in points.
func (p *Phone) statusBarPt() int {
	sb := max(p.opts.HeightPt*p.opts.Scale*3/80, 6) // the simulated status bar, in pixels
	return (sb + p.opts.Scale - 1) / p.opts.Scale
}

// screenInfo answers GET /wda/screen: sizes in points and the scale.
func (p *Phone) screenInfo(*request) (any, *wdaError) {
	return map[string]any{
		"screenSize":    map[string]any{"width": p.opts.WidthPt, "height": p.opts.HeightPt},
		"statusBarSize": map[string]any{"width": p.opts.WidthPt, "height": p.statusBarPt()},
		"scale":         p.opts.Scale,
	}, nil
}

func (p *Phone) windowSize(*request) (any, *wdaError) {
	return map[string]any{"width": p.opts.WidthPt, "height": p.opts.HeightPt}, nil
}

func (p *Phone) isLocked(*request) (any, *wdaError) { return p.Locked(), nil }

func (p *Phone) lock(*request) (any, *wdaError) {
	p.SetLocked(true)
	return nil, nil
}

// unlock answers POST /wda/unlock: a phone with a passcode stays locked,
// and WDA gives up waiting for it (XCUIDevice+FBHelpers.m fb_unlockScreen).
func (p *Phone) unlock(*request) (any, *wdaError) {
	if !p.Locked() {
		return nil, nil
	}
	if p.opts.Passcode {
		return nil, unknownError("Timed out while waiting until the screen gets unlocked")
	}
	p.SetLocked(false)
	return nil, nil
}

func (p *Phone) homescreen(q *request) (any, *wdaError) {
	p.noteForeground()
	if err := p.screen.Key(q.r.Context(), "KEYCODE_HOME"); err != nil {
		return nil, unknownError("%v", err)
	}
	return nil, nil
}

// buttons are the hardware buttons of /wda/pressButton (lower case, as
// XCUIDevice+FBHelpers.m fb_availableButtonNames), with the key the
// simulated phone gets.
var buttons = map[string]string{"home": "KEYCODE_HOME", "volumeup": "KEYCODE_VOLUME_UP", "volumedown": "KEYCODE_VOLUME_DOWN"}

func (p *Phone) pressButton(q *request) (any, *wdaError) {
	name := q.str("name")
	key, ok := buttons[strings.ToLower(name)]
	if !ok {
		return nil, unknownError("The button '%s' is not supported. The device under test only supports the following buttons: (\n    home,\n    volumedown,\n    volumeup\n)", name)
	}
	p.noteForeground()
	if err := p.screen.Key(q.r.Context(), key); err != nil {
		return nil, unknownError("%v", err)
	}
	return nil, nil
}

// WDA's orientation names (FBOrientationCommands.m) and the simulated
// phone's.
var orientations = map[string]string{
	"PORTRAIT":                              protocol.OrientationPortrait,
	"LANDSCAPE":                             protocol.OrientationLandscape,
	"UIA_DEVICE_ORIENTATION_LANDSCAPERIGHT": protocol.OrientationReverseLandscape,
	"UIA_DEVICE_ORIENTATION_PORTRAIT_UPSIDEDOWN": protocol.OrientationReversePortrait,
}

func (p *Phone) orientation(*request) (any, *wdaError) {
	o := p.screen.Orientation()
	for wda, sim := range orientations {
		if sim == o {
			return wda, nil
		}
	}
	return "PORTRAIT", nil
}

func (p *Phone) setOrientation(q *request) (any, *wdaError) {
	o, ok := orientations[strings.ToUpper(q.str("orientation"))]
	if !ok {
		return nil, unknownError("Unable To Rotate Device")
	}
	if err := p.screen.Rotate(q.r.Context(), o); err != nil {
		return nil, unknownError("Unable To Rotate Device")
	}
	return nil, nil
}

// actions answers POST /actions: W3C pointer actions (FBW3CActionsSynthesizer.m)
// in points. A press released where it went down is a tap, or a long
// press when held 500 ms or more; one that moved while down is a swipe.
// They reach the simulated phone in pixels; on a locked phone they reach
// nothing.
func (p *Phone) actions(q *request) (any, *wdaError) {
	chains, ok := q.args["actions"].([]any)
	if !ok {
		return nil, invalidArgument("'actions' is mandatory: an array of action chains")
	}
	var gestures []gesture
	for i, c := range chains {
		chain, ok := c.(map[string]any)
		if !ok {
			return nil, invalidArgument("actions[%d] is not an object", i)
		}
		typ, _ := chain["type"].(string)
		if typ != "pointer" {
			continue // key and none sources move no finger
		}
		g, werr := pointerGestures(i, chain)
		if werr != nil {
			return nil, werr
		}
		gestures = append(gestures, g...)
	}
	if p.Locked() {
		return nil, nil
	}
	ctx := q.r.Context()
	s := float64(p.opts.Scale)
	px := func(v float64) int { return int(math.Round(v * s)) }
	for _, g := range gestures {
		var err error
		switch {
		case g.moved:
			err = p.screen.Swipe(ctx, px(g.x0), px(g.y0), px(g.x1), px(g.y1), g.held)
		case g.held >= 500*time.Millisecond:
			err = p.screen.Swipe(ctx, px(g.x0), px(g.y0), px(g.x0), px(g.y0), g.held)
		default:
			err = p.screen.Tap(ctx, px(g.x0), px(g.y0))
		}
		if err != nil {
			return nil, unknownError("%v", err)
		}
	}
	p.noteForeground()
	return nil, nil
}

// gesture is one press of a finger: down at (x0, y0), up at (x1, y1),
// held for held.
type gesture struct {
	x0, y0, x1, y1 float64
	held           time.Duration
	moved          bool
}

func pointerGestures(i int, chain map[string]any) ([]gesture, *wdaError) {
	items, ok := chain["actions"].([]any)
	if !ok {
		return nil, invalidArgument("actions[%d].actions is mandatory", i)
	}
	var out []gesture
	var x, y float64
	var cur *gesture
	for j, it := range items {
		a, ok := it.(map[string]any)
		if !ok {
			return nil, invalidArgument("actions[%d].actions[%d] is not an object", i, j)
		}
		dur, _ := a["duration"].(float64)
		d := time.Duration(dur * float64(time.Millisecond))
		switch typ, _ := a["type"].(string); typ {
		case "pointerMove":
			nx, okx := a["x"].(float64)
			ny, oky := a["y"].(float64)
			if !okx || !oky {
				return nil, invalidArgument("actions[%d].actions[%d]: pointerMove needs x and y", i, j)
			}
			switch origin := a["origin"].(type) {
			case nil:
			case string:
				switch origin {
				case "viewport":
				case "pointer":
					nx, ny = x+nx, y+ny
				default:
					return nil, invalidArgument("actions[%d].actions[%d]: unknown origin %q", i, j, origin)
				}
			default:
				return nil, invalidArgument("actions[%d].actions[%d]: element origins are not supported", i, j)
			}
			x, y = nx, ny
			if cur != nil {
				cur.held += d
				if x != cur.x0 || y != cur.y0 {
					cur.moved = true
				}
				cur.x1, cur.y1 = x, y
			}
		case "pointerDown":
			if cur == nil {
				cur = &gesture{x0: x, y0: y, x1: x, y1: y}
			}
		case "pause":
			if cur != nil {
				cur.held += d
			}
		case "pointerUp":
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		case "pointerCancel":
			cur = nil
		default:
			return nil, invalidArgument("actions[%d].actions[%d]: unknown action type %q", i, j, typ)
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out, nil
}
