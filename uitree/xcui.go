package uitree

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// An iPhone's dump is WebDriverAgent's source XML (docs/selectors.md,
// "iPhones"): every element is named by its type, XCUIElementTypeButton
// and so on, with the attributes type, name, label, value, enabled,
// visible, selected, x, y, width and height (in points). The agent adds
// two attributes to the root: edgeagent-scale, the pixels in a point, and
// edgeagent-bundle-id, the app in the foreground.

// xcuiPrefix begins the name of every element of an iPhone's dump.
const xcuiPrefix = "XCUIElementType"

// Attributes the agent puts on the root of an iPhone's dump.
const (
	attrScale    = "edgeagent-scale"
	attrBundleID = "edgeagent-bundle-id"
)

// Element types whose state an iPhone's dump gives as value "1" (on) or
// "0" (off): Checked.
var xcuiCheckable = map[string]bool{
	"XCUIElementTypeSwitch": true, "XCUIElementTypeCheckBox": true, "XCUIElementTypeToggle": true,
}

// Element types a user taps: Clickable (WebDriverAgent's source does not
// say which elements take a tap).
var xcuiClickable = map[string]bool{
	"XCUIElementTypeButton": true, "XCUIElementTypeCell": true, "XCUIElementTypeLink": true,
	"XCUIElementTypeIcon": true, "XCUIElementTypeSwitch": true, "XCUIElementTypeToggle": true,
	"XCUIElementTypeCheckBox": true, "XCUIElementTypeRadioButton": true, "XCUIElementTypeTextField": true,
	"XCUIElementTypeSecureTextField": true, "XCUIElementTypeSearchField": true, "XCUIElementTypeTextView": true,
	"XCUIElementTypeTab": true, "XCUIElementTypeMenuItem": true, "XCUIElementTypeKey": true,
}

// Element types that scroll: Scrollable.
var xcuiScrollable = map[string]bool{
	"XCUIElementTypeScrollView": true, "XCUIElementTypeTable": true, "XCUIElementTypeCollectionView": true,
}

// xcuiRoot is what the root of an iPhone's dump says about every node.
type xcuiRoot struct {
	scale  int
	bundle string
	// frame is the root's bounds, the screen: every other node's bounds
	// are kept within it when clip is set (the root has a positive area).
	frame [4]int
	clip  bool
}

// readXCUIRoot reads the agent's attributes off the root: a scale that
// is not a whole number from 1 to MaxScale is refused (the bounds, and
// every tap at them, would be off), an absent one is 1.
func readXCUIRoot(attrs []xml.Attr) (xcuiRoot, error) {
	r := xcuiRoot{scale: 1}
	for _, a := range attrs {
		switch a.Name.Local {
		case attrScale:
			s, err := strconv.Atoi(a.Value)
			if err != nil || s < 1 || s > MaxScale {
				return xcuiRoot{}, fmt.Errorf("ui dump: %s %q is not a whole number from 1 to %d", attrScale, shorten(a.Value), MaxScale)
			}
			r.scale = s
		case attrBundleID:
			r.bundle = a.Value
		}
	}
	return r, nil
}

// read sets n's fields from the element el of an iPhone's dump
// (docs/selectors.md, "iPhones", the mapping). The first node read is the
// root, whose bounds are the frame the others are kept within.
func (r *xcuiRoot) read(n *Node, el xml.StartElement, intern map[string]string) {
	var typ, label, value string
	var rect [4]float64 // x, y, width, height in points
	have := 0
	for _, a := range el.Attr {
		v := a.Value
		switch a.Name.Local {
		case "type":
			typ = v
		case "name":
			n.ID = internString(intern, v)
		case "label":
			label = v
		case "value":
			value = v
		case "enabled":
			n.Enabled = v == "true"
		case "selected":
			n.Selected = v == "true"
		case "focused":
			n.Focused = v == "true"
		case "visible":
			n.Hidden = v != "true"
		case "x", "y", "width", "height":
			i := strings.Index("xywh", a.Name.Local[:1])
			if p, ok := parsePoints(v); ok {
				rect[i] = p
				have |= 1 << i
			} else {
				have &^= 1 << i
			}
		}
	}
	if typ == "" {
		typ = el.Name.Local
	}
	n.Class = internString(intern, typ)
	n.Desc = label
	n.Text = label
	if label == "" {
		n.Text = value
	}
	n.Package = r.bundle
	n.Checked = xcuiCheckable[typ] && value == "1"
	n.Clickable = xcuiClickable[typ]
	n.Scrollable = xcuiScrollable[typ]
	if have == 0b1111 {
		n.Bounds = r.pixels(rect)
	}
	if n.Index == 0 {
		r.frame = n.Bounds
		r.clip = n.Bounds[2] > n.Bounds[0] && n.Bounds[3] > n.Bounds[1]
		return
	}
	if r.clip {
		for i := range n.Bounds {
			lo, hi := r.frame[i%2], r.frame[i%2+2]
			n.Bounds[i] = min(max(n.Bounds[i], lo), hi)
		}
	}
}

// pixels are the bounds in pixels of x, y, width, height in points: each
// edge times the scale, rounded; zero when an edge is beyond ±MaxCoord.
func (r *xcuiRoot) pixels(rect [4]float64) [4]int {
	s := float64(r.scale)
	edges := [4]float64{rect[0], rect[1], rect[0] + rect[2], rect[1] + rect[3]}
	var b [4]int
	for i, e := range edges {
		p := math.Round(e * s)
		if p < -MaxCoord || p > MaxCoord {
			return [4]int{}
		}
		b[i] = int(p)
	}
	return b
}

// parsePoints reads a coordinate in points as WebDriverAgent writes it: a
// decimal number ("16", "-0.5", "20.333333333333332"), within ±MaxCoord.
func parsePoints(v string) (float64, bool) {
	if v == "" || len(v) > 64 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && c != '.' && c != '-' && c != 'e' && c != 'E' && c != '+' {
			return 0, false
		}
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil || p < -MaxCoord || p > MaxCoord {
		return 0, false
	}
	return p, true
}
