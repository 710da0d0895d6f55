package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/observe"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// Element steps (docs/selectors.md): each takes a UI dump of its own and
// resolves its selector on it with the one engine (package uitree).

// DefaultLongPress is the duration of a long_press without duration_ms.
const DefaultLongPress = time.Second

// Polling of wait_for: the first dump at once, then after waitForFirst,
// growing by half up to waitForMax between dumps.
const (
	waitForFirst = 100 * time.Millisecond
	waitForMax   = time.Second
)

// scrollSwipe is how long a scroll_until swipe takes: slow enough that the
// list does not fling past the element.
const scrollSwipe = 400 * time.Millisecond

// ElementNotFoundError is returned (wrapping ErrElementNotFound) when no
// element matched a step's selector; Err is the engine's answer, which
// names the selector and the closest candidates on screen.
type ElementNotFoundError struct {
	Op    string
	After string // "after 5s", "after 10 swipes", or ""
	Err   error
}

func (e *ElementNotFoundError) Error() string {
	s := e.Op + ": " + e.Err.Error()
	if e.After != "" {
		s += " (" + e.After + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrElementNotFound) hold.
func (e *ElementNotFoundError) Is(target error) bool { return target == ErrElementNotFound }

func (e *ElementNotFoundError) Unwrap() error { return e.Err }

// screen is one UI dump of the phone, parsed.
type screen struct {
	raw  []byte
	tree *uitree.Tree
	at   time.Time
}

func (r *Runner) dumpScreen(ctx context.Context) (screen, error) {
	at := time.Now()
	raw, err := r.dev.UIDump(ctx)
	if err != nil {
		return screen{}, err
	}
	t, err := uitree.Parse(raw)
	if err != nil {
		// The phone's answer is not a dump this agent can read: running the
		// step again elsewhere may work, so it is not an invalid step.
		return screen{}, fmt.Errorf("read the phone's ui dump: %w", err)
	}
	return screen{raw: raw, tree: t, at: at}, nil
}

// resolve finds the element s names on a fresh dump.
func (r *Runner) resolve(ctx context.Context, s protocol.Step) (*uitree.Node, screen, error) {
	m, err := uitree.Compile(*s.Element)
	if err != nil {
		return nil, screen{}, invalidStep("element: %v", err)
	}
	sc, err := r.dumpScreen(ctx)
	if err != nil {
		return nil, screen{}, err
	}
	n, err := m.Resolve(sc.tree)
	if err != nil {
		return nil, sc, &ElementNotFoundError{Op: s.Op, Err: err}
	}
	return n, sc, nil
}

// tapElement runs tap, long_press and text with an element: a tap (or a
// press of d) at the centre of its bounds.
func (r *Runner) tapElement(ctx context.Context, s protocol.Step, d time.Duration) error {
	n, _, err := r.resolve(ctx, s)
	if err != nil {
		return err
	}
	x, y := n.Centre()
	r.point = &[2]int{x, y}
	if d > 0 {
		return r.dev.Swipe(ctx, x, y, x, y, d)
	}
	return r.dev.Tap(ctx, x, y)
}

// waitFor dumps the screen until the element is visible (or gone, as the
// step says) or its timeout passes, backing off between dumps.
func (r *Runner) waitFor(ctx context.Context, s protocol.Step) error {
	m, err := uitree.Compile(*s.Element)
	if err != nil {
		return invalidStep("element: %v", err)
	}
	timeout := time.Duration(s.TimeoutMS) * time.Millisecond
	if timeout == 0 {
		timeout = protocol.DefaultWaitForMS * time.Millisecond
	}
	gone := s.State == protocol.StateGone
	deadline := time.Now().Add(timeout)
	pause := waitForFirst
	for {
		sc, err := r.dumpScreen(ctx)
		if err != nil {
			return err
		}
		n, rerr := m.Resolve(sc.tree)
		switch {
		case !gone && rerr == nil:
			return nil
		case gone && rerr != nil:
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			after := "after " + timeout.String()
			if gone {
				return fmt.Errorf("%w: wait_for: %s is still on screen at [%d,%d][%d,%d] (%s)", ErrAssertion, s.Element, n.Bounds[0], n.Bounds[1], n.Bounds[2], n.Bounds[3], after)
			}
			return &ElementNotFoundError{Op: s.Op, After: after, Err: rerr}
		}
		if err := sleepCtx(ctx, min(pause, left)); err != nil {
			return ctxErr(ctx)
		}
		pause = min(pause*3/2, waitForMax)
	}
}

// assert checks the element on one dump: visible (and its text matching
// the step's expression) or gone.
func (r *Runner) assert(ctx context.Context, s protocol.Step) error {
	n, _, err := r.resolve(ctx, s)
	var nf *ElementNotFoundError
	switch {
	case s.State == protocol.StateGone && errors.As(err, &nf):
		return nil
	case s.State == protocol.StateGone && err == nil:
		return fmt.Errorf("%w: %s is on screen at [%d,%d][%d,%d], expected gone", ErrAssertion, s.Element, n.Bounds[0], n.Bounds[1], n.Bounds[2], n.Bounds[3])
	case errors.As(err, &nf):
		return fmt.Errorf("%w: %w", ErrAssertion, nf.Err)
	case err != nil:
		return err
	}
	if s.Matches != "" {
		re, err := protocol.CompileSelectorValue("~" + s.Matches)
		if err != nil {
			return invalidStep("matches: %v", err)
		}
		if !re.MatchString(n.Text) {
			return fmt.Errorf("%w: the text of %s is %q, which does not match %q", ErrAssertion, s.Element, n.Text, s.Matches)
		}
	}
	return nil
}

// scrollUntil swipes the way the step says until the element is visible,
// at most max_swipes times; a swipe that leaves the screen as it was ends
// the search early (the end of the list).
func (r *Runner) scrollUntil(ctx context.Context, s protocol.Step) error {
	m, err := uitree.Compile(*s.Element)
	if err != nil {
		return invalidStep("element: %v", err)
	}
	most := s.MaxSwipes
	if most == 0 {
		most = protocol.DefaultMaxSwipes
	}
	var prev []byte
	for swipes := 0; ; swipes++ {
		sc, err := r.dumpScreen(ctx)
		if err != nil {
			return err
		}
		_, rerr := m.Resolve(sc.tree)
		if rerr == nil {
			return nil
		}
		if prev != nil && bytes.Equal(prev, sc.raw) {
			return &ElementNotFoundError{Op: s.Op, After: fmt.Sprintf("the screen stopped moving after %d swipes", swipes), Err: rerr}
		}
		if swipes == most {
			return &ElementNotFoundError{Op: s.Op, After: fmt.Sprintf("after %d swipes", swipes), Err: rerr}
		}
		prev = sc.raw
		w, h := screenSize(sc.tree)
		if w <= 0 || h <= 0 {
			return fmt.Errorf("scroll_until: the ui dump gives no screen size")
		}
		x1, y1, x2, y2 := scrollVector(s.Direction, w, h)
		if err := r.dev.Swipe(ctx, x1, y1, x2, y2, scrollSwipe); err != nil {
			return err
		}
	}
}

// scrollVector is the finger's path that moves the view in direction
// (down: reveals what is below, so the finger goes up), within the middle
// of the screen to stay clear of the status and navigation bars.
func scrollVector(direction string, w, h int) (x1, y1, x2, y2 int) {
	cx, cy := w/2, h/2
	switch direction {
	case "up":
		return cx, h * 3 / 10, cx, h * 7 / 10
	case "left":
		return w * 3 / 10, cy, w * 7 / 10, cy
	case "right":
		return w * 7 / 10, cy, w * 3 / 10, cy
	default: // down
		return cx, h * 7 / 10, cx, h * 3 / 10
	}
}

// extract reads the element's attribute off a dump, takes a screenshot
// right after as evidence, keeps both as artifacts of the step
// (<name>-NNN.xml and <name>-NNN.png) and records the observation.
func (r *Runner) extract(ctx context.Context, seq int, s protocol.Step) ([]Artifact, error) {
	n, sc, err := r.resolve(ctx, s)
	var nf *ElementNotFoundError
	if errors.As(err, &nf) && s.Required != nil && !*s.Required {
		r.warning = fmt.Sprintf("extract %s: element absent, nothing recorded: %v", s.Name, nf.Err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	shot, err := r.dev.Screenshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("screenshot as evidence: %w", err)
	}
	var raw string
	switch s.Attr {
	case protocol.AttrDesc:
		raw = n.Desc
	case protocol.AttrBounds:
		raw = fmt.Sprintf("[%d,%d][%d,%d]", n.Bounds[0], n.Bounds[1], n.Bounds[2], n.Bounds[3])
	default:
		raw = n.Text
	}
	parse := s.Parse
	if parse == "" {
		parse = protocol.ParseText
	}
	v, err := observe.Read(raw, observe.Options{Parse: parse, Currency: s.Currency, Tax: s.Tax})
	if err != nil {
		return nil, fmt.Errorf("%w: %s of %s: %w", ErrExtract, s.Name, s.Element, err)
	}
	dumpArt, err := r.capture("", s.Name, seq, ".xml", ContentTypeXML, func() ([]byte, error) { return sc.raw, nil })
	if err != nil {
		return nil, err
	}
	shotArt, err := r.capture("", s.Name, seq, ".png", ContentTypePNG, func() ([]byte, error) { return shot, nil })
	if err != nil {
		for _, a := range dumpArt {
			_ = a.Remove()
			r.unreserve(a.Name)
		}
		return nil, err
	}
	arts := append(dumpArt, shotArt...)
	o := &protocol.Observation{
		Step: seq, Name: s.Name, Raw: raw, Value: v.Value, Parse: parse, Currency: v.Currency, Tax: v.Tax,
		Bounds: n.Bounds, Selector: s.Element.String(), ObservedAt: sc.at.UTC(),
	}
	for _, a := range arts {
		o.Evidence = append(o.Evidence, protocol.Evidence{Name: a.Name, SHA256: a.SHA256})
	}
	if n.Package != "" {
		o.App = r.appVersion(ctx, n.Package)
	}
	r.observation = o
	return arts, nil
}

// appVersion returns pkg's version as the phone tells it, asked once per
// job; a phone that cannot tell gives the package alone.
func (r *Runner) appVersion(ctx context.Context, pkg string) *protocol.AppVersion {
	r.mu.Lock()
	v, ok := r.versions[pkg]
	r.mu.Unlock()
	if ok {
		return &v
	}
	v = protocol.AppVersion{Package: pkg}
	if av, isAV := r.dev.(AppVersioner); isAV {
		if got, err := av.AppVersion(ctx, pkg); err == nil {
			v = got
		} else {
			zerolog.Ctx(r.job).Debug().Err(err).Str("package", pkg).Msg("app version not read")
		}
	}
	r.mu.Lock()
	if r.versions == nil {
		r.versions = map[string]protocol.AppVersion{}
	}
	r.versions[pkg] = v
	r.mu.Unlock()
	return &v
}

// screenSize is the extent of the dump's nodes: the root's bounds on a
// phone's dump, which cover the screen.
func screenSize(t *uitree.Tree) (w, h int) {
	for i := range t.Nodes {
		b := t.Nodes[i].Bounds
		w, h = max(w, b[2]), max(h, b[3])
	}
	return w, h
}

// Apps returns the versions of the apps the job launched or read values
// from, by package; an app whose version the phone did not tell is left
// out.
func (r *Runner) Apps() []protocol.AppVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]protocol.AppVersion, 0, len(r.versions))
	for _, v := range r.versions {
		if v.VersionName != "" || v.VersionCode != 0 {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b protocol.AppVersion) int { return strings.Compare(a.Package, b.Package) })
	return out
}
