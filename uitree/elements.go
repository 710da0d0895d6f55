package uitree

import "github.com/edgeagent/edgeagent/protocol"

// Element is a node worth showing to someone choosing what to act on (the
// coordinator's MCP list_elements tool lists these).
type Element struct {
	// Index is the element's position in the list, from 0.
	Index       int    `json:"index"`
	Text        string `json:"text,omitempty"`
	ResourceID  string `json:"resource_id,omitempty"`
	Description string `json:"content_description,omitempty"`
	Class       string `json:"class,omitempty"`
	Clickable   bool   `json:"clickable"`
	// Bounds are left, top, right, bottom in screen pixels.
	Bounds [4]int `json:"bounds"`
	// Package is the app the element belongs to.
	Package string `json:"package,omitempty"`
}

// Centre is the point a tap on the element hits.
func (e Element) Centre() (x, y int) {
	return (e.Bounds[0] + e.Bounds[2]) / 2, (e.Bounds[1] + e.Bounds[3]) / 2
}

// MaxElements bounds the list Elements gives.
const MaxElements = 500

// Elements lists the nodes worth showing, in document order, at most
// MaxElements: a visible node (Node.Visible) with text, a resource id, a
// content description, or clickable. Indexes count from 0 in the list.
// On an iPhone the resource id is the accessibility identifier (name),
// and the description, the label, is left out where it is the text
// already (docs/selectors.md, "iPhones").
func (t *Tree) Elements() []Element {
	var out []Element
	ios := t.Platform == protocol.PlatformIOS
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !n.Visible() || n.Text == "" && n.ID == "" && n.Desc == "" && !n.Clickable {
			continue
		}
		desc := n.Desc
		if ios && desc == n.Text {
			desc = ""
		}
		out = append(out, Element{
			Index: len(out), Text: n.Text, ResourceID: n.ID, Description: desc,
			Class: n.Class, Clickable: n.Clickable, Bounds: n.Bounds, Package: n.Package,
		})
		if len(out) == MaxElements {
			break
		}
	}
	return out
}
