package mcp_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uitree"
)

// TestMCPIPhone: an MCP client drives an iPhone (the fake WebDriverAgent)
// of the real edgeagent binary as it drives an Android phone: list_phones
// shows it with its screen in pixels; the screenshot is a PNG of the
// iPhone's pixel size, scaled down on request; the elements are those of
// its source, with the iPhone's ids, in pixels; a tap on the launcher's
// Shop element opens the shop (the tap lands inside the element), one on a
// product's name selects its row; text
// beyond ASCII typed into the shop's field reaches WDA exactly as sent and
// shows in the field; home goes back to the launcher, and a key an iPhone
// lacks is a tool error naming the keys it has.
func TestMCPIPhone(t *testing.T) {
	e := newEnv(t, 3*time.Second, time.Minute)
	iphone, err := fakewda.Start(fakewda.Options{Catalogue: []capture.SimProduct{{Name: "ほうじ茶 500ml", Price: "¥1,280"}, {Name: "抹茶ラテ", Price: "¥968"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iphone.Close() })
	const w, h = fakewda.DefaultWidthPt * fakewda.DefaultScale, fakewda.DefaultHeightPt * fakewda.DefaultScale
	e.servers.StartAgent(e2e.AgentOptions{ID: "pc-ios", Phones: []e2e.Phone{{Serial: iphone.UDID(), WDAURL: iphone.URL(), Tags: []string{"lab"}}}})
	cs := e.connect(alice)

	var listed []mcp.Phone
	testenv.Eventually(t, e2e.WaitTimeout, "the iPhone listed, free, with its screen size", func() bool {
		listed = phones(t, cs)
		return len(listed) == 1 && listed[0].Serial == iphone.UDID() && listed[0].Free && listed[0].ScreenWidth == w
	})
	if p := listed[0]; p.Agent != "pc-ios" || p.Model != fakewda.DefaultModel || p.State != protocol.DeviceReady || p.ScreenHeight != h {
		t.Fatalf("list_phones %+v", p)
	}
	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, map[string]any{"serial": iphone.UDID()}), &open)
	if open.Agent != "pc-ios" || open.Serial != iphone.UDID() {
		t.Fatalf("open_session %+v", open)
	}
	id := map[string]any{"session_id": open.SessionID}

	shot := ok(t, cs, mcp.ToolScreenshot, id)
	if gw, gh := pngSize(t, shot); gw != w || gh != h {
		t.Fatalf("screenshot %dx%d, want the iPhone's %dx%d pixels", gw, gh, w, h)
	}
	if msg := text(shot); !strings.Contains(msg, "screenshot 1179x2556, stored as artifact screenshot-001.png") {
		t.Fatalf("screenshot text %q", msg)
	}
	// Scaled to the iPhone's width in points: one pixel per point.
	shot = ok(t, cs, mcp.ToolScreenshot, map[string]any{"session_id": open.SessionID, "max_width": fakewda.DefaultWidthPt})
	if gw, gh := pngSize(t, shot); gw != fakewda.DefaultWidthPt || gh != fakewda.DefaultHeightPt {
		t.Fatalf("scaled screenshot %dx%d, want %dx%d", gw, gh, fakewda.DefaultWidthPt, fakewda.DefaultHeightPt)
	}

	// The launcher (SpringBoard): tap its Shop element; the shop opens.
	els := elements(t, cs, open.SessionID)
	shop := slices.IndexFunc(els, func(el mcp.Element) bool { return el.Text == "Shop" })
	if shop < 0 || !strings.HasPrefix(els[shop].Class, "XCUIElementType") {
		t.Fatalf("no iPhone Shop element in %+v", els)
	}
	b := els[shop].Bounds
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": shop})
	taps := simTaps(iphone.Screen())
	if len(taps) != 1 || taps[0].X < b[0] || taps[0].X > b[2] || taps[0].Y < b[1] || taps[0].Y > b[3] {
		t.Fatalf("the iPhone's taps %+v, want one inside the Shop element %v", taps, b)
	}
	if fg := iphone.Screen().Foreground(); fg != capture.SimShop {
		t.Fatalf("foreground %q after tapping Shop, want %s", fg, capture.SimShop)
	}

	// A product row, by its name's element: the shop selects the row.
	els = elements(t, cs, open.SessionID)
	row := slices.IndexFunc(els, func(el mcp.Element) bool { return el.Text == "ほうじ茶 500ml" && el.ResourceID == "name" })
	if row < 0 {
		t.Fatalf("no product name with id name in %+v", els)
	}
	if sel := selectedProducts(t, iphone.Screen()); len(sel) != 0 {
		t.Fatalf("selected product rows %v before any tap", sel)
	}
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": row})
	if sel := selectedProducts(t, iphone.Screen()); len(sel) != 1 || sel[0] != 0 {
		t.Fatalf("selected product rows %v after tapping the first, want [0]", sel)
	}

	// The shop's field, by its iPhone id (the identifier, not an Android
	// resource id): tap it, type Japanese.
	field := slices.IndexFunc(els, func(el mcp.Element) bool { return el.ResourceID == "input" })
	if field < 0 || els[field].Class != "XCUIElementTypeTextField" || els[field].Package != capture.SimShop {
		t.Fatalf("no iPhone text field with id input in %+v", els)
	}
	const query = "ほうじ茶 500ml を検索"
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "element": field})
	typed := text(ok(t, cs, mcp.ToolTypeText, map[string]any{"session_id": open.SessionID, "text": query}))
	if !strings.Contains(typed, "typed 14 characters") {
		t.Fatalf("type_text %q", typed)
	}
	if got := iphone.Typed(); got != query {
		t.Fatalf("WDA received %q, want %q exactly", got, query)
	}
	els = elements(t, cs, open.SessionID)
	if i := slices.IndexFunc(els, func(el mcp.Element) bool { return el.ResourceID == "input" }); i < 0 || els[i].Text != query {
		t.Fatalf("the field after typing: %+v", els)
	}

	// An iPhone's keys: home goes back to the launcher; it has no back key.
	fails(t, cs, mcp.ToolPressKey, map[string]any{"session_id": open.SessionID, "key": "back"}, "an iPhone has only the keys KEYCODE_HOME")
	ok(t, cs, mcp.ToolPressKey, map[string]any{"session_id": open.SessionID, "key": "home"})
	if fg := iphone.Screen().Foreground(); fg != capture.SimLauncher {
		t.Fatalf("foreground %q after pressing home, want the launcher", fg)
	}

	closed := text(ok(t, cs, mcp.ToolCloseSession, id))
	if !strings.Contains(closed, "closed after 11 steps") {
		t.Fatalf("close_session %q", closed)
	}
	if !slices.ContainsFunc(iphone.Requests(), func(r string) bool { return strings.HasSuffix(r, "/wda/keys") }) {
		t.Fatalf("no /wda/keys request reached WDA: %v", iphone.Requests())
	}
	if ps := phones(t, cs); len(ps) != 1 || !ps[0].Free {
		t.Fatalf("list_phones after close %+v, want the iPhone free", ps)
	}
}

// simTaps are the taps a simulated screen received.
func simTaps(s *capture.Simulated) []capture.SimCall {
	var out []capture.SimCall
	for _, c := range s.History() {
		if c.Op == protocol.OpTap {
			out = append(out, c)
		}
	}
	return out
}

// selectedProducts are the indexes of the shop's product rows the
// simulated screen shows selected.
func selectedProducts(t *testing.T, s *capture.Simulated) []int {
	t.Helper()
	dump, err := s.UIDump(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := uitree.Parse(dump)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	i := 0
	for _, n := range tree.Nodes {
		if n.ID == capture.SimShop+":id/product" {
			if n.Selected {
				out = append(out, i)
			}
			i++
		}
	}
	return out
}
