package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Tool names (docs/mcp.md, "Tools").
const (
	ToolListPhones   = "list_phones"
	ToolOpenSession  = "open_session"
	ToolScreenshot   = "screenshot"
	ToolListElements = "list_elements"
	ToolTap          = "tap"
	ToolLongPress    = "long_press"
	ToolSwipe        = "swipe"
	ToolTypeText     = "type_text"
	ToolPressKey     = "press_key"
	ToolLaunchApp    = "launch_app"
	ToolWait         = "wait"
	ToolCloseSession = "close_session"
	// ToolRecordObservation records a value read off the screen as an
	// observation of the dataset (session.OpRecordObservation).
	ToolRecordObservation = "record_observation"
)

// Limits of the tools' arguments.
const (
	DefaultLongPressMS = 1000
	MaxGestureMS       = 10_000
	DefaultSwipeMS     = 300
	MaxWaitMS          = 60_000
	MaxOpenWaitSeconds = 300
)

// Phone is a phone as list_phones shows it.
type Phone struct {
	Agent    string   `json:"agent"`
	Serial   string   `json:"serial"`
	Platform string   `json:"platform" jsonschema:"android or ios"`
	Model    string   `json:"model,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	State    string   `json:"state" jsonschema:"device when usable; otherwise what is wrong (offline, unauthorized, agent offline, agent draining)"`
	Free     bool     `json:"free" jsonschema:"true when open_session can take it now"`
	// Reason says why a resting or quarantined phone is not offered.
	Reason string `json:"reason,omitempty" jsonschema:"why a resting or quarantined phone takes no session now"`
	// ScreenWidth and ScreenHeight are the screen's pixels in the natural
	// orientation, as the agent last read them (0: not known).
	ScreenWidth  int `json:"screen_width,omitempty" jsonschema:"screen width in pixels, natural orientation; tap coordinates are in these pixels"`
	ScreenHeight int `json:"screen_height,omitempty" jsonschema:"screen height in pixels, natural orientation"`
}

type listPhonesIn struct{}

// ListPhonesOut is list_phones' structured result.
type ListPhonesOut struct {
	Phones []Phone `json:"phones"`
}

type openIn struct {
	Serial      string   `json:"serial,omitempty" jsonschema:"the phone's serial, as list_phones shows it; leave out to take any matching phone"`
	Model       string   `json:"model,omitempty" jsonschema:"a phone model, e.g. Pixel 7"`
	Tags        []string `json:"tags,omitempty" jsonschema:"tags the phone must all carry"`
	Project     string   `json:"project,omitempty" jsonschema:"the project to work in; needed only when the token has several"`
	WaitSeconds int      `json:"wait_seconds,omitempty" jsonschema:"how long to wait for a matching phone to become free (default 10, at most 300)"`
}

// OpenOut is open_session's structured result.
type OpenOut struct {
	SessionID   string `json:"session_id" jsonschema:"pass it to every other tool"`
	JobID       string `json:"job_id"`
	Project     string `json:"project"`
	Agent       string `json:"agent"`
	Serial      string `json:"serial"`
	Model       string `json:"model,omitempty"`
	IdleTimeout string `json:"idle_timeout" jsonschema:"the session closes itself after this long without a tool call"`
}

type sessionIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
}

type screenshotIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
	MaxWidth  int    `json:"max_width,omitempty" jsonschema:"scale the image down to at most this many pixels wide (the aspect ratio is kept); leave out for full size"`
}

// ElementsOut is list_elements' structured result.
type ElementsOut struct {
	Elements []Element `json:"elements"`
}

type pointIn struct {
	SessionID  string `json:"session_id" jsonschema:"the id open_session returned"`
	Element    *int   `json:"element,omitempty" jsonschema:"index of an element from this session's last list_elements: the gesture hits its centre"`
	X          *int   `json:"x,omitempty" jsonschema:"screen x in pixels (with y, instead of element)"`
	Y          *int   `json:"y,omitempty" jsonschema:"screen y in pixels (with x, instead of element)"`
	DurationMS int    `json:"duration_ms,omitempty" jsonschema:"long_press only: how long to hold, in milliseconds (default 1000, at most 10000)"`
}

type swipeIn struct {
	SessionID  string `json:"session_id" jsonschema:"the id open_session returned"`
	X1         int    `json:"x1" jsonschema:"start x in pixels"`
	Y1         int    `json:"y1" jsonschema:"start y in pixels"`
	X2         int    `json:"x2" jsonschema:"end x in pixels"`
	Y2         int    `json:"y2" jsonschema:"end y in pixels"`
	DurationMS int    `json:"duration_ms,omitempty" jsonschema:"how long the swipe takes, in milliseconds (default 300, at most 10000)"`
}

type textIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
	Text      string `json:"text" jsonschema:"printable text to type into the focused field (tap the field first); no tab or newline (use press_key TAB or ENTER)"`
}

type keyIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
	Key       string `json:"key" jsonschema:"an Android key: BACK, HOME, ENTER, DEL, APP_SWITCH, or any KEYCODE_ name or number; on an iPhone HOME, VOLUME_UP or VOLUME_DOWN"`
}

type launchIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
	Package   string `json:"package" jsonschema:"the app's package name, e.g. com.android.settings (on an iPhone its bundle id, e.g. com.apple.Preferences)"`
}

type recordIn struct {
	SessionID string `json:"session_id" jsonschema:"the id open_session returned"`
	Name      string `json:"name" jsonschema:"the observation's name, e.g. price: a letter, then up to 63 letters, digits, _ . or -"`
	Raw       string `json:"raw" jsonschema:"the text exactly as the screen shows it, as you read it (at most 4096 bytes)"`
	Element   *int   `json:"element,omitempty" jsonschema:"index of the element you read it from, in this session's last list_elements: its bounds and app are recorded"`
	Bounds    []int  `json:"bounds,omitempty" jsonschema:"left, top, right, bottom in screen pixels of where you read it, instead of element"`
	Parse     string `json:"parse,omitempty" jsonschema:"how to read raw: text (the default), number or price; a string that does not show exactly one number or price is refused"`
	Currency  string `json:"currency,omitempty" jsonschema:"price only: the ISO 4217 code of a price shown without a currency sign, and the one a sign shown must agree with (e.g. JPY)"`
	Tax       string `json:"tax,omitempty" jsonschema:"price only: included or excluded, to pick one of a string showing both prices"`
}

// RecordOut is record_observation's structured result: what was recorded.
type RecordOut struct {
	Step       int                            `json:"step" jsonschema:"the session's last step when it was recorded"`
	Name       string                         `json:"name"`
	Raw        string                         `json:"raw"`
	Value      string                         `json:"value" jsonschema:"raw read as parse says: the text, or a decimal string"`
	Parse      string                         `json:"parse"`
	Currency   string                         `json:"currency,omitempty"`
	Tax        string                         `json:"tax,omitempty"`
	Bounds     [4]int                         `json:"bounds"`
	AppPackage string                         `json:"app_package,omitempty"`
	Evidence   []jobstore.ObservationEvidence `json:"evidence" jsonschema:"the session's latest screenshot and UI dump, as stored"`
}

type waitIn struct {
	SessionID  string `json:"session_id" jsonschema:"the id open_session returned"`
	DurationMS int    `json:"duration_ms" jsonschema:"how long to wait, in milliseconds (1 to 60000)"`
}

func (s *Server) addTools() {
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolListPhones, Annotations: ro,
		Description: "List the phones this token may use: agent, serial, model, tags, state, and whether each is free to open a session on now."}, s.listPhones)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolOpenSession,
		Description: "Take a phone for yourself: opens a session on a free phone matching the selector (serial, model, tags; all optional) and returns its session_id. " +
			"The phone is yours until close_session, until no tool call came for the idle timeout, or until your MCP session ends. Answers an error when no matching phone is free within wait_seconds."}, s.openSession)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolScreenshot,
		Description: "Take a screenshot of the session's phone: returns the PNG (scaled down to max_width when given) and the name of the stored artifact."}, s.screenshot)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolListElements,
		Description: "List the elements on the phone's screen from its UI hierarchy: index, text, resource id, content description, class, clickable, bounds [left,top][right,bottom]. " +
			"Pass an index to tap or long_press as element to hit that element's centre."}, s.listElements)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolTap,
		Description: "Tap the screen: at an element from the last list_elements (element=INDEX, its centre), or at x,y in screen pixels."}, s.tap)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolLongPress,
		Description: "Press and hold: at an element from the last list_elements (element=INDEX) or at x,y, for duration_ms (default 1000)."}, s.longPress)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolSwipe,
		Description: "Swipe from x1,y1 to x2,y2 (screen pixels) over duration_ms (default 300). To scroll down a list, swipe up: from a point low on the screen to one higher up (y2 < y1)."}, s.swipe)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolTypeText,
		Description: "Type text into the focused field; tap the field first. Any printable characters: an iPhone types any text; on an Android phone text beyond ASCII needs the ADBKeyboard input method (the error says so). For tab or newline use press_key."}, s.typeText)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolPressKey,
		Description: "Press a key: on an Android phone BACK, HOME, ENTER, DEL (backspace), APP_SWITCH, or any KEYCODE_ name or key code number; an iPhone has only HOME, VOLUME_UP and VOLUME_DOWN."}, s.pressKey)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolLaunchApp,
		Description: "Launch an app by its package name (e.g. com.android.settings) and bring it to the foreground."}, s.launchApp)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolWait,
		Description: "Wait duration_ms milliseconds on the phone (for an animation or a page to load) before the next call."}, s.wait)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolRecordObservation,
		Description: "Record a value you read off the screen (a price, a name) as an observation of the project's dataset: name, raw (the text exactly as shown), " +
			"element (an index from the last list_elements) or bounds, and parse (text, number or price, with currency and tax). " +
			"The session's latest screenshot and UI dump are stored with it as evidence: look (screenshot, list_elements) before you record. " +
			"Refused, and nothing recorded, when the session was lost."}, s.recordObservation)
	sdk.AddTool(s.srv, &sdk.Tool{Name: ToolCloseSession,
		Description: "Close the session: the phone is released for others and the session's operation log is stored. Call it when done."}, s.closeTool)
}

// toolErr is a tool error a model reads.
func toolErr(format string, a ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

func textResult(format string, a ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

// actor returns the caller when its token may act (operate scope).
func actor(req *sdk.CallToolRequest) (api.Caller, *sdk.CallToolResult) {
	c, ok := callerOf(req)
	if !ok {
		return c, toolErr("the request carries no API token")
	}
	if !c.Has(jobstore.ScopeOperate) {
		return c, toolErr("token %s lacks the operate scope: it may list phones but not open or drive sessions (create a token with --scopes read,operate)", c.Name)
	}
	return c, nil
}

// usable says why none of the caller's projects may use phone d of agent
// agentID under the coordinator's phone rule, "" when one may (a token of
// every project, "*", may use every phone the rule gives some project).
func (s *Server) usable(c api.Caller, agentID string, d protocol.Device) string {
	return s.opts.Sessions.Phones().RefusalFor(c.Projects, agentID, d)
}

func (s *Server) listPhones(ctx context.Context, req *sdk.CallToolRequest, _ listPhonesIn) (*sdk.CallToolResult, ListPhonesOut, error) {
	c, ok := callerOf(req)
	if !ok {
		return toolErr("the request carries no API token"), ListPhonesOut{}, nil
	}
	agents, err := s.opts.Store.Agents(ctx)
	if err != nil {
		return nil, ListPhonesOut{}, fmt.Errorf("list agents: %w", err)
	}
	running, err := s.opts.Store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
	if err != nil {
		return nil, ListPhonesOut{}, fmt.Errorf("list running jobs: %w", err)
	}
	busy := map[[2]string]bool{}
	for _, j := range running {
		if j.Device != "" && j.WorkerID != "" {
			busy[[2]string{fencing.Token{Owner: j.WorkerID}.AgentID(), j.Device}] = true
		}
	}
	out := ListPhonesOut{Phones: []Phone{}}
	dups := coordinator.DuplicateSerials(agents, s.opts.OfflineAfter)
	var hidden []string
	for _, a := range agents {
		for _, d := range a.Devices {
			if why := s.usable(c, a.ID, d); why != "" {
				if a.Online(s.opts.OfflineAfter) {
					hidden = append(hidden, fmt.Sprintf("%s of agent %s: %s", d.Serial, a.ID, why))
				}
				continue
			}
			p := Phone{Agent: a.ID, Serial: d.Serial, Platform: protocol.PlatformOf(d), Model: d.Model, Tags: d.Tags, State: d.State, Reason: d.Reason}
			if ids := dups[d.Serial]; len(ids) > 1 {
				p.State, p.Reason = "refused", coordinator.DuplicateReason(d.Serial, ids)
			}
			if d.Facts != nil {
				p.ScreenWidth, p.ScreenHeight = d.Facts.ScreenWidth, d.Facts.ScreenHeight
			}
			switch {
			case !a.Online(s.opts.OfflineAfter):
				p.State = "agent offline"
			case a.Draining || a.AgentDraining:
				p.State = "agent draining"
			}
			p.Free = p.State == protocol.DeviceReady && !busy[[2]string{a.ID, d.Serial}]
			out.Phones = append(out.Phones, p)
		}
	}
	sort.Slice(out.Phones, func(i, j int) bool {
		if out.Phones[i].Agent != out.Phones[j].Agent {
			return out.Phones[i].Agent < out.Phones[j].Agent
		}
		return out.Phones[i].Serial < out.Phones[j].Serial
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%d phones:\n", len(out.Phones))
	if len(out.Phones) == 0 && len(hidden) > 0 {
		// Never an empty list without a word: the rule hid them.
		fmt.Fprintf(&b, "%d connected phones are not for project %s under the coordinator's projects.<name>.phones (docs/operations.md, \"Which phones a project may use\"): %s\n",
			len(hidden), strings.Join(c.Projects, ", "), strings.Join(hidden, "; "))
	}
	for _, p := range out.Phones {
		free := "busy"
		if p.Free {
			free = "free"
		}
		fmt.Fprintf(&b, "- serial=%s platform=%s model=%q agent=%s tags=%s state=%s %s", p.Serial, p.Platform, p.Model, p.Agent, strings.Join(p.Tags, ","), p.State, free)
		if p.ScreenWidth > 0 && p.ScreenHeight > 0 {
			fmt.Fprintf(&b, " screen=%dx%d", p.ScreenWidth, p.ScreenHeight)
		}
		if p.Reason != "" {
			fmt.Fprintf(&b, " (%s)", p.Reason)
		}
		b.WriteString("\n")
	}
	return textResult("%s", b.String()), out, nil
}

func (s *Server) openSession(ctx context.Context, req *sdk.CallToolRequest, in openIn) (*sdk.CallToolResult, OpenOut, error) {
	c, denied := actor(req)
	if denied != nil {
		return denied, OpenOut{}, nil
	}
	project := in.Project
	if project == "" {
		own := slices.DeleteFunc(slices.Clone(c.Projects), func(p string) bool { return p == "*" })
		if len(own) != 1 {
			return toolErr("project: required, the token has %d projects (%s)", len(own), strings.Join(own, ", ")), OpenOut{}, nil
		}
		project = own[0]
	}
	if err := jobstore.CheckProject(project); err != nil {
		return toolErr("project: %v", err), OpenOut{}, nil
	}
	if !sees(c, project) {
		return toolErr("project: %q is not among the token's projects", project), OpenOut{}, nil
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > MaxOpenWaitSeconds {
		return toolErr("wait_seconds: %d is out of range 0 to %d", in.WaitSeconds, MaxOpenWaitSeconds), OpenOut{}, nil
	}
	// Which phones the project may use is the coordinator's phone rule,
	// applied by the session manager and the scheduler.
	sel := protocol.DeviceSelector{Serial: in.Serial, Model: in.Model, Tags: slices.Clone(in.Tags)}
	// The job's own idle timeout backs the endpoint's: should the
	// coordinator not close the session, the agent ends it a minute later.
	jobIdle := min(s.opts.IdleTimeout+time.Minute, session.MaxIdleTimeout)
	info, err := s.opts.Sessions.Open(ctx, session.OpenRequest{Project: project, SubmittedBy: c.Name, Device: sel,
		IdleTimeout: jobIdle, Wait: time.Duration(in.WaitSeconds) * time.Second})
	if err != nil {
		return toolErr("%s", describe(err)), OpenOut{}, nil
	}
	s.track(req.Session, info)
	out := OpenOut{SessionID: info.ID, JobID: info.JobID, Project: info.Project, Agent: info.Agent,
		Serial: info.Phone.Serial, Model: info.Phone.Model, IdleTimeout: s.opts.IdleTimeout.String()}
	return textResult("session %s open on phone %s (%s) of agent %s; it closes after %v without a tool call. Pass session_id=%s to the other tools.",
		out.SessionID, out.Serial, out.Model, out.Agent, s.opts.IdleTimeout, out.SessionID), out, nil
}

// describe is the message a model reads for a session error.
func describe(err error) string {
	var (
		le *session.LostError
		ee *session.EndedError
		be *session.BusyError
		ue *session.UnavailableError
		ie *session.InputError
	)
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("session %s lost at generation %d after step %d: %s. The phone was taken away from this session; "+
			"nothing more runs on it, here or on another phone. Open a new session to continue.", le.SessionID, le.Generation, le.LastStep, le.Reason)
	case errors.As(err, &ee):
		return ee.Error() + ". Open a new session to continue."
	case errors.As(err, &be):
		return be.Error() + " (list_phones shows which phones are free; try again later or with another selector)"
	case errors.As(err, &ue):
		return ue.Error() + " (the session stays open; the call may be retried)"
	case errors.As(err, &ie):
		// A tool's one step: its arguments' names, not the steps'.
		f := strings.TrimPrefix(strings.TrimPrefix(ie.Field, "steps[0]"), ".")
		f = strings.Replace(f, "element_index", "element", 1)
		if f == "" {
			return ie.Msg
		}
		return f + ": " + ie.Msg
	case errors.Is(err, session.ErrNotFound):
		return "no such session (open_session returns the session_id to pass)"
	}
	return err.Error()
}

// use checks that the caller may drive session id and marks it in use;
// the returned func ends the use.
func (s *Server) use(ctx context.Context, req *sdk.CallToolRequest, id string) (func(), *sdk.CallToolResult) {
	c, denied := actor(req)
	if denied != nil {
		return nil, denied
	}
	if id == "" {
		return nil, toolErr("session_id: required (open_session returns it)")
	}
	project, err := s.opts.Sessions.Project(ctx, id)
	if err != nil {
		return nil, toolErr("%s", describe(err))
	}
	if !sees(c, project) {
		s.deny(ctx, c, req.Params.Name, id, project)
		return nil, toolErr("session %s belongs to a project not among the token's projects", id)
	}
	return s.tracked(id).use(), nil
}

// step runs one step on session id as one fenced session step.
func (s *Server) step(ctx context.Context, req *sdk.CallToolRequest, id string, st protocol.Step) (session.StepResult, *sdk.CallToolResult) {
	return s.sessionStep(ctx, req, id, session.Step{Step: st})
}

// sessionStep runs one session step (a phone's step or a
// record_observation) on session id, as the sessions API does.
func (s *Server) sessionStep(ctx context.Context, req *sdk.CallToolRequest, id string, st session.Step) (session.StepResult, *sdk.CallToolResult) {
	done, denied := s.use(ctx, req, id)
	if denied != nil {
		return session.StepResult{}, denied
	}
	defer done()
	res, err := s.opts.Sessions.Step(ctx, id, []session.Step{st})
	if err != nil {
		var (
			le *session.LostError
			ee *session.EndedError
		)
		if errors.As(err, &le) || errors.As(err, &ee) {
			s.forget(id)
		}
		if errors.Is(err, session.ErrRefused) {
			return session.StepResult{}, toolErr("observation not recorded: %v. %s", session.ErrRefused, describe(err))
		}
		return session.StepResult{}, toolErr("%s", describe(err))
	}
	r := res[0]
	if r.Outcome != protocol.OutcomeOK {
		return r, toolErr("step %d (%s) failed on the phone: %s", r.Seq, r.Op, r.Error)
	}
	return r, nil
}

func (s *Server) screenshot(ctx context.Context, req *sdk.CallToolRequest, in screenshotIn) (*sdk.CallToolResult, any, error) {
	if in.MaxWidth < 0 {
		return toolErr("max_width: %d is negative", in.MaxWidth), nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpScreenshot})
	if bad != nil {
		return bad, nil, nil
	}
	if len(r.Captures) == 0 {
		return toolErr("step %d took no screenshot", r.Seq), nil, nil
	}
	c := r.Captures[0]
	raw, err := s.fetch(ctx, c)
	if err != nil {
		return toolErr("step %d: %v", r.Seq, err), nil, nil
	}
	img, w, h, err := scalePNG(raw, in.MaxWidth)
	if err != nil {
		return toolErr("step %d: %v", r.Seq, err), nil, nil
	}
	return &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.ImageContent{Data: img, MIMEType: "image/png"},
		&sdk.TextContent{Text: fmt.Sprintf("step %d: screenshot %dx%d, stored as artifact %s", r.Seq, w, h, c.Name)},
	}}, nil, nil
}

func (s *Server) listElements(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, ElementsOut, error) {
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpUIDump})
	if bad != nil {
		return bad, ElementsOut{}, nil
	}
	if len(r.Captures) == 0 {
		return toolErr("step %d made no UI dump", r.Seq), ElementsOut{}, nil
	}
	raw, err := s.fetch(ctx, r.Captures[0])
	if err != nil {
		return toolErr("step %d: %v", r.Seq, err), ElementsOut{}, nil
	}
	els, err := parseElements(raw)
	if err != nil {
		return toolErr("step %d: %v", r.Seq, err), ElementsOut{}, nil
	}
	s.mu.Lock()
	s.elements[in.SessionID] = els
	s.mu.Unlock()
	out := ElementsOut{Elements: els}
	return textResult("step %d (artifact %s): %s", r.Seq, r.Captures[0].Name, formatElements(els)), out, nil
}

// point resolves the element or coordinates of in.
func (s *Server) point(in pointIn) (int, int, *sdk.CallToolResult) {
	switch {
	case in.Element != nil && (in.X != nil || in.Y != nil):
		return 0, 0, toolErr("give either element or x and y, not both")
	case in.Element != nil:
		s.mu.Lock()
		els, ok := s.elements[in.SessionID]
		s.mu.Unlock()
		if !ok {
			return 0, 0, toolErr("element: call list_elements on this session first")
		}
		if *in.Element < 0 || *in.Element >= len(els) {
			return 0, 0, toolErr("element: %d is not an index of the last list_elements (0 to %d)", *in.Element, len(els)-1)
		}
		x, y := els[*in.Element].Centre()
		return x, y, nil
	case in.X == nil || in.Y == nil:
		return 0, 0, toolErr("give element (an index from list_elements) or both x and y")
	case *in.X < 0 || *in.Y < 0:
		return 0, 0, toolErr("x, y: (%d,%d) is off screen", *in.X, *in.Y)
	}
	return *in.X, *in.Y, nil
}

func (s *Server) tap(ctx context.Context, req *sdk.CallToolRequest, in pointIn) (*sdk.CallToolResult, any, error) {
	x, y, bad := s.point(in)
	if bad != nil {
		return bad, nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpTap, X: x, Y: y})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: tapped at (%d,%d)", r.Seq, x, y), nil, nil
}

func (s *Server) longPress(ctx context.Context, req *sdk.CallToolRequest, in pointIn) (*sdk.CallToolResult, any, error) {
	x, y, bad := s.point(in)
	if bad != nil {
		return bad, nil, nil
	}
	d := in.DurationMS
	if d == 0 {
		d = DefaultLongPressMS
	}
	if d < 0 || d > MaxGestureMS {
		return toolErr("duration_ms: %d is out of range 1 to %d", in.DurationMS, MaxGestureMS), nil, nil
	}
	// A long press is a swipe that does not move.
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpSwipe, X: x, Y: y, X2: x, Y2: y, DurationMS: int64(d)})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: pressed (%d,%d) for %d ms", r.Seq, x, y, d), nil, nil
}

func (s *Server) swipe(ctx context.Context, req *sdk.CallToolRequest, in swipeIn) (*sdk.CallToolResult, any, error) {
	d := in.DurationMS
	if d == 0 {
		d = DefaultSwipeMS
	}
	if d < 0 || d > MaxGestureMS {
		return toolErr("duration_ms: %d is out of range 1 to %d", in.DurationMS, MaxGestureMS), nil, nil
	}
	if in.X1 < 0 || in.Y1 < 0 || in.X2 < 0 || in.Y2 < 0 {
		return toolErr("x1, y1, x2, y2: coordinates must not be negative"), nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpSwipe, X: in.X1, Y: in.Y1, X2: in.X2, Y2: in.Y2, DurationMS: int64(d)})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: swiped (%d,%d) to (%d,%d) in %d ms", r.Seq, in.X1, in.Y1, in.X2, in.Y2, d), nil, nil
}

func (s *Server) typeText(ctx context.Context, req *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
	if in.Text == "" {
		return toolErr("text: required"), nil, nil
	}
	if err := protocol.CheckTypable(in.Text); err != nil {
		return toolErr("text: %v", err), nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpText, Text: in.Text})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: typed %d characters", r.Seq, utf8.RuneCountInString(in.Text)), nil, nil
}

// keyName turns BACK, back, 4 or KEYCODE_BACK into what the phone takes.
func keyName(k string) string {
	k = strings.TrimSpace(k)
	if k == "" || strings.Trim(k, "0123456789") == "" {
		return k
	}
	k = strings.ToUpper(k)
	if !strings.HasPrefix(k, "KEYCODE_") {
		k = "KEYCODE_" + k
	}
	return k
}

func (s *Server) pressKey(ctx context.Context, req *sdk.CallToolRequest, in keyIn) (*sdk.CallToolResult, any, error) {
	k := keyName(in.Key)
	if k == "" {
		return toolErr("key: required"), nil, nil
	}
	for _, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return toolErr("key: %q is not a key name or number", in.Key), nil, nil
		}
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpKey, Key: k})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: pressed %s", r.Seq, k), nil, nil
}

func (s *Server) launchApp(ctx context.Context, req *sdk.CallToolRequest, in launchIn) (*sdk.CallToolResult, any, error) {
	if in.Package == "" {
		return toolErr("package: required"), nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpLaunch, Package: in.Package})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: launched %s", r.Seq, in.Package), nil, nil
}

func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, in waitIn) (*sdk.CallToolResult, any, error) {
	if in.DurationMS < 1 || in.DurationMS > MaxWaitMS {
		return toolErr("duration_ms: %d is out of range 1 to %d", in.DurationMS, MaxWaitMS), nil, nil
	}
	r, bad := s.step(ctx, req, in.SessionID, protocol.Step{Op: protocol.OpWait, DurationMS: int64(in.DurationMS)})
	if bad != nil {
		return bad, nil, nil
	}
	return textResult("step %d: waited %d ms", r.Seq, in.DurationMS), nil, nil
}

func (s *Server) recordObservation(ctx context.Context, req *sdk.CallToolRequest, in recordIn) (*sdk.CallToolResult, RecordOut, error) {
	st := session.Step{Step: protocol.Step{Op: session.OpRecordObservation, Name: in.Name, Parse: in.Parse, Currency: in.Currency, Tax: in.Tax},
		Raw: in.Raw, ElementIndex: in.Element}
	if in.Bounds != nil {
		if len(in.Bounds) != 4 {
			return toolErr("bounds: %d numbers, want 4: left, top, right, bottom", len(in.Bounds)), RecordOut{}, nil
		}
		b := [4]int(in.Bounds)
		st.Bounds = &b
	}
	// Checked before the session is looked up: bad arguments touch
	// nothing.
	if err := session.CheckSteps([]session.Step{st}); err != nil {
		return toolErr("%s", describe(err)), RecordOut{}, nil
	}
	r, bad := s.sessionStep(ctx, req, in.SessionID, st)
	if bad != nil {
		return bad, RecordOut{}, nil
	}
	o := r.Observation
	out := RecordOut{Step: o.Step, Name: o.Name, Raw: o.Raw, Value: o.Value, Parse: o.Parse, Currency: o.Currency, Tax: o.Tax,
		Bounds: o.Bounds, AppPackage: o.AppPackage, Evidence: o.Evidence}
	names := make([]string, 0, len(o.Evidence))
	for _, e := range o.Evidence {
		names = append(names, e.Name)
	}
	value := o.Value
	if o.Currency != "" {
		value += " " + o.Currency
	}
	return textResult("recorded %s = %s (read %q as %s, after step %d), with evidence %s", o.Name, value, o.Raw, o.Parse, o.Step,
		strings.Join(names, ", ")), out, nil
}

func (s *Server) closeTool(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, any, error) {
	done, denied := s.use(ctx, req, in.SessionID)
	if denied != nil {
		return denied, nil, nil
	}
	s.forget(in.SessionID)
	info, arts, err := s.opts.Sessions.Close(ctx, in.SessionID)
	done()
	if err != nil {
		return toolErr("%s", describe(err)), nil, nil
	}
	names := make([]string, 0, len(arts))
	for _, a := range arts {
		names = append(names, a.Name)
	}
	return textResult("session %s closed after %d steps; the phone is free. Artifacts of job %s: %s",
		info.ID, info.LastStep, info.JobID, strings.Join(names, ", ")), nil, nil
}

// deny records a tool call on session id of another project.
func (s *Server) deny(ctx context.Context, c api.Caller, tool, id, project string) {
	s.log.Warn().Str("token_name", c.Name).Str("tool", tool).Str("session_id", id).Str("project", project).
		Msg("mcp: refused a tool call on another project's session")
	if s.opts.Denials == nil {
		return
	}
	jobID, _ := session.JobOf(id)
	if err := s.opts.Denials.RecordAPIDenial(ctx, jobstore.APIDenial{TokenName: c.Name, Method: "MCP " + tool,
		Route: api.MCPPath, JobID: jobID, Project: project}); err != nil {
		s.log.Error().Err(err).Msg("mcp: record denial")
	}
}
