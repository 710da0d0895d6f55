// Package uitree reads the UI hierarchy a phone dumps, an Android phone's
// (uiautomator's XML) or an iPhone's (WebDriverAgent's source XML, with
// the agent's scale and bundle id on its root), and finds elements in it
// by selector (protocol.Selector, docs/selectors.md, "iPhones" for how
// an iPhone's attributes stand for the selector's keys).
//
// A dump is hostile input: it comes from a phone, or back from storage,
// where whoever can write the bucket put it. Parse bounds its size, the
// number of nodes and their nesting before it holds them, and refuses a
// dump past a bound with an error naming the bound.
package uitree

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/protocol"
)

// Bounds of a dump, checked by Parse. A phone's screen dumps a few
// hundred to a few thousand nodes, 10–30 deep, in tens to hundreds of
// kilobytes.
const (
	// MaxDumpBytes is the largest dump Parse reads.
	MaxDumpBytes = 16 << 20
	// MaxNodes is the most nodes a dump may hold.
	MaxNodes = 50_000
	// MaxDepth is how deep elements may nest in a dump, the hierarchy
	// element included (a node directly under it is at depth 2).
	MaxDepth = 200
	// MaxCoord bounds a coordinate of a node's bounds: a node whose
	// bounds have a coordinate beyond ±MaxCoord has zero bounds, as one
	// whose bounds cannot be read.
	MaxCoord = 1 << 24
	// MaxScale is the largest edgeagent-scale an iPhone's dump may give
	// (iPhones have 2 or 3 pixels per point, iPads 1 or 2).
	MaxScale = 4
)

// Tree is a parsed dump: every node, in document order.
type Tree struct {
	// Platform is the kind of phone the dump is from, told by its root
	// element: protocol.PlatformIOS for WebDriverAgent's source (an
	// XCUIElementType… root), protocol.PlatformAndroid for any other.
	Platform string
	// Scale is how many pixels a point is in an iPhone's dump (its root's
	// edgeagent-scale, 1 when absent); 1 for an Android dump, whose
	// bounds are pixels already.
	Scale int
	// Rotation is the hierarchy's rotation attribute: 0, 1, 2 or 3
	// quarter turns (0 when absent or unreadable, and on an iPhone).
	Rotation int
	// Nodes are all the nodes of the dump in document order: Nodes[i]
	// has Index i.
	Nodes []Node
}

// Node is one node of a dump.
type Node struct {
	// Index is the node's position in document order, from 0 (not the
	// dump's own index attribute, which counts among siblings).
	Index int
	// Parent is the Index of the node this one is in, -1 for a root.
	Parent int
	// Depth is the number of nodes this one is in: 0 for a root.
	Depth int

	// The values selectors match. On an iPhone (docs/selectors.md,
	// "iPhones"): Text is the label, or the value when the label is
	// empty; ID the name (the accessibility identifier); Desc the label;
	// Class the type; Package the root's edgeagent-bundle-id.
	Text    string // text
	ID      string // resource-id
	Desc    string // content-desc
	Class   string // class
	Package string // package

	// Bounds are left, top, right, bottom in screen pixels, from
	// bounds="[l,t][r,b]"; all zero when the attribute is missing or
	// cannot be read. On an iPhone they are x, y, width and height in
	// points times the tree's Scale, rounded, and kept within the
	// application's frame (the root's).
	Bounds [4]int

	// States, true when the attribute is "true". On an iPhone Checked is
	// a switch, checkbox or toggle whose value is "1", and Clickable and
	// Scrollable follow the type (controls and cells; scroll views,
	// tables and collection views).
	Enabled, Checked, Selected, Clickable, Scrollable, Focused bool

	// Hidden is an iPhone's element whose visible attribute is there and
	// not "true": WebDriverAgent lists elements that are off screen or
	// covered, and says so. Never set on an Android dump, which holds
	// only what shows.
	Hidden bool

	// end is the Index after the node's last descendant: its descendants
	// are Nodes[Index+1 : end].
	end int
}

// Centre is the point a tap on the node hits.
func (n *Node) Centre() (x, y int) {
	return (n.Bounds[0] + n.Bounds[2]) / 2, (n.Bounds[1] + n.Bounds[3]) / 2
}

// Visible reports whether the node has a positive area on screen and is
// not Hidden. A uiautomator dump holds only what is visible to the user,
// clipped to the screen, so a node of zero width or height is one nothing
// of shows; an iPhone's dump says which elements are not visible, and
// its bounds are clipped to the screen when parsed.
func (n *Node) Visible() bool {
	return !n.Hidden && n.Bounds[2] > n.Bounds[0] && n.Bounds[3] > n.Bounds[1]
}

// Descendants returns the nodes inside n, in document order.
func (t *Tree) Descendants(n *Node) []Node {
	return t.Nodes[n.Index+1 : n.end]
}

// Parse reads a dump: uiautomator's (a hierarchy element holding nested
// node elements) or, when the root element is an XCUIElementType…
// element, WebDriverAgent's source, whose XCUIElementType… elements are
// the nodes (readXCUI). It refuses a dump over MaxDumpBytes, with more
// than MaxNodes nodes, nested deeper than MaxDepth, that is not
// well-formed XML, or whose root gives an edgeagent-scale that is not a
// whole number from 1 to MaxScale; a node's bounds that cannot be read
// are zero, not an error. Every error begins "ui dump: ".
func Parse(dump []byte) (*Tree, error) {
	if len(dump) > MaxDumpBytes {
		return nil, fmt.Errorf("ui dump: %d bytes, over the limit of %d", len(dump), MaxDumpBytes)
	}
	t := &Tree{Platform: protocol.PlatformAndroid, Scale: 1}
	dec := xml.NewDecoder(bytes.NewReader(dump))
	// The open elements: for a node its Index, for any other element -1.
	var open []int
	parent := -1 // Index of the innermost open node
	depth := 0   // open nodes
	intern := map[string]string{}
	seenRoot := false
	var ios *xcuiRoot // the root's attributes, on an iPhone's dump
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ui dump: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(open) == MaxDepth {
				return nil, fmt.Errorf("ui dump: elements nest deeper than %d", MaxDepth)
			}
			if !seenRoot {
				seenRoot = true
				// Every node starts with "<node" (or "<prefix:node"), or
				// on an iPhone "<XCUIElementType", so this bounds the
				// nodes without trusting the document; MaxNodes bounds it
				// again.
				marker := "node"
				if strings.HasPrefix(tok.Name.Local, xcuiPrefix) {
					root, err := readXCUIRoot(tok.Attr)
					if err != nil {
						return nil, err
					}
					ios = &root
					t.Platform, t.Scale = protocol.PlatformIOS, root.scale
					marker = "<" + xcuiPrefix
				}
				t.Nodes = make([]Node, 0, min(bytes.Count(dump, []byte(marker)), MaxNodes))
			}
			isNode := tok.Name.Local == "node"
			if ios != nil {
				isNode = strings.HasPrefix(tok.Name.Local, xcuiPrefix)
			}
			switch {
			case isNode:
				if len(t.Nodes) == MaxNodes {
					return nil, fmt.Errorf("ui dump: more than %d nodes", MaxNodes)
				}
				n := Node{Index: len(t.Nodes), Parent: parent, Depth: depth}
				if ios != nil {
					ios.read(&n, tok, intern)
				} else {
					readAttrs(&n, tok.Attr, intern)
				}
				t.Nodes = append(t.Nodes, n)
				open = append(open, n.Index)
				parent = n.Index
				depth++
			case ios == nil && tok.Name.Local == "hierarchy":
				for _, a := range tok.Attr {
					if a.Name.Local == "rotation" {
						if r, err := strconv.Atoi(a.Value); err == nil && r >= 0 && r <= 3 {
							t.Rotation = r
						}
					}
				}
				open = append(open, -1)
			default:
				open = append(open, -1)
			}
		case xml.EndElement:
			// The decoder checks that end elements match start elements,
			// so open is not empty here.
			i := open[len(open)-1]
			open = open[:len(open)-1]
			if i >= 0 {
				t.Nodes[i].end = len(t.Nodes)
				parent = t.Nodes[i].Parent
				depth--
			}
		}
	}
	if !seenRoot {
		return nil, errors.New("ui dump: no XML element")
	}
	return t, nil
}

// readAttrs sets n's fields from a node's attributes. Class and package
// names repeat over a dump; intern keeps one copy of each.
func readAttrs(n *Node, attrs []xml.Attr, intern map[string]string) {
	for _, a := range attrs {
		v := a.Value
		switch a.Name.Local {
		case "text":
			n.Text = v
		case "resource-id":
			n.ID = internString(intern, v)
		case "content-desc":
			n.Desc = v
		case "class":
			n.Class = internString(intern, v)
		case "package":
			n.Package = internString(intern, v)
		case "bounds":
			n.Bounds, _ = parseBounds(v)
		case "enabled":
			n.Enabled = v == "true"
		case "checked":
			n.Checked = v == "true"
		case "selected":
			n.Selected = v == "true"
		case "clickable":
			n.Clickable = v == "true"
		case "scrollable":
			n.Scrollable = v == "true"
		case "focused":
			n.Focused = v == "true"
		}
	}
}

// maxInterned bounds the strings one dump interns (a dump of distinct
// values gains nothing from it).
const maxInterned = 4096

func internString(m map[string]string, s string) string {
	if s == "" {
		return ""
	}
	if v, ok := m[s]; ok {
		return v
	}
	if len(m) < maxInterned {
		m[s] = s
	}
	return s
}

// parseBounds reads "[l,t][r,b]": four integers within ±MaxCoord.
func parseBounds(s string) ([4]int, bool) {
	var b [4]int
	s, ok1 := strings.CutPrefix(s, "[")
	s, ok2 := strings.CutSuffix(s, "]")
	first, second, ok3 := strings.Cut(s, "][")
	if !ok1 || !ok2 || !ok3 {
		return [4]int{}, false
	}
	for i, pair := range []string{first, second} {
		x, y, ok := strings.Cut(pair, ",")
		if !ok {
			return [4]int{}, false
		}
		xi, err1 := strconv.Atoi(x)
		yi, err2 := strconv.Atoi(y)
		if err1 != nil || err2 != nil || xi < -MaxCoord || xi > MaxCoord || yi < -MaxCoord || yi > MaxCoord {
			return [4]int{}, false
		}
		b[2*i], b[2*i+1] = xi, yi
	}
	return b, true
}
