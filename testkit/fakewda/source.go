package fakewda

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/uitree"
)

// xcuiTypes maps an Android widget class (its simple name) to the
// XCUIElementType a similar iOS element has.
var xcuiTypes = map[string]string{
	"TextView":     "XCUIElementTypeStaticText",
	"Button":       "XCUIElementTypeButton",
	"ImageButton":  "XCUIElementTypeButton",
	"EditText":     "XCUIElementTypeTextField",
	"ImageView":    "XCUIElementTypeImage",
	"ScrollView":   "XCUIElementTypeScrollView",
	"RecyclerView": "XCUIElementTypeTable",
	"ListView":     "XCUIElementTypeTable",
	"CheckBox":     "XCUIElementTypeSwitch",
	"Switch":       "XCUIElementTypeSwitch",
}

// xcuiType returns the XCUIElementType of an Android class: layouts and
// anything else are XCUIElementTypeOther.
func xcuiType(class string) string {
	simple := class[strings.LastIndex(class, ".")+1:]
	if t, ok := xcuiTypes[simple]; ok {
		return t
	}
	return "XCUIElementTypeOther"
}

// xcuiSource converts the simulated phone's uiautomator dump to the XML
// WDA's GET /source gives (FBXPath.m): an XCUIElementTypeApplication
// holding an XCUIElementTypeWindow holding the elements, bounds in points
// (pixels divided by the scale). A resource id gives the name (the part
// after ":id/"), WDA naming an element by its label when it has no
// identifier; text gives the label, and the value of static texts, text
// fields; a content description is the label of an element without text.
func (p *Phone) xcuiSource(dump []byte) (string, error) {
	t, err := uitree.Parse(dump)
	if err != nil {
		return "", err
	}
	kids := make([][]int, len(t.Nodes))
	var roots []int
	appName := ""
	pkg := ""
	for i, n := range t.Nodes {
		if n.Parent < 0 {
			roots = append(roots, i)
		} else {
			kids[n.Parent] = append(kids[n.Parent], i)
		}
		if pkg == "" {
			pkg = n.Package
		}
		if appName == "" && strings.HasSuffix(n.ID, ":id/title") {
			appName = n.Text
		}
	}
	if pkg == capture.SimLauncher || pkg == "" {
		appName = "SpringBoard"
	}
	if appName == "" {
		appName = pkg
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	full := [4]int{0, 0, p.opts.WidthPt, p.opts.HeightPt}
	writeElement(&b, 0, "XCUIElementTypeApplication", elem{name: appName, label: appName, enabled: true, visible: true, rect: full}, false)
	writeElement(&b, 1, "XCUIElementTypeWindow", elem{enabled: true, visible: true, rect: full}, false)
	var walk func(i, index, depth int)
	walk = func(i, index, depth int) {
		n := &t.Nodes[i]
		typ := xcuiType(n.Class)
		e := elem{
			enabled: n.Enabled, visible: n.Visible(), selected: n.Selected, index: index,
			rect: [4]int{n.Bounds[0] / p.opts.Scale, n.Bounds[1] / p.opts.Scale,
				(n.Bounds[2] - n.Bounds[0]) / p.opts.Scale, (n.Bounds[3] - n.Bounds[1]) / p.opts.Scale},
		}
		if _, id, ok := strings.Cut(n.ID, ":id/"); ok {
			e.name = id
		}
		e.label = n.Text
		if e.label == "" {
			e.label = n.Desc
		}
		switch typ {
		case "XCUIElementTypeStaticText", "XCUIElementTypeTextField":
			e.value = n.Text
			e.accessible = true
		case "XCUIElementTypeSwitch":
			e.value = "0"
			if n.Checked {
				e.value = "1"
			}
			e.accessible = true
		case "XCUIElementTypeButton", "XCUIElementTypeImage":
			e.accessible = true
		}
		if e.name == "" {
			e.name = e.label
		}
		writeElement(&b, depth, typ, e, len(kids[i]) == 0)
		for k, c := range kids[i] {
			walk(c, k, depth+1)
		}
		if len(kids[i]) > 0 {
			fmt.Fprintf(&b, "%s</%s>\n", strings.Repeat("  ", depth), typ)
		}
	}
	// The dump's root frame is the window itself: its children are the
	// window's.
	index := 0
	for _, r := range roots {
		for _, c := range kids[r] {
			walk(c, index, 2)
			index++
		}
	}
	b.WriteString("  </XCUIElementTypeWindow>\n</XCUIElementTypeApplication>\n")
	return b.String(), nil
}

// elem is the attributes of one element of the source.
type elem struct {
	name, label, value                     string
	enabled, visible, accessible, selected bool
	rect                                   [4]int // x, y, width, height in points
	index                                  int
}

// writeElement writes an element's start tag, self-closed when leaf; like
// WDA it leaves out the attributes without a value.
func writeElement(b *bytes.Buffer, depth int, typ string, e elem, leaf bool) {
	fmt.Fprintf(b, `%s<%s type="%s"`, strings.Repeat("  ", depth), typ, typ)
	for _, a := range [][2]string{{"name", e.name}, {"label", e.label}, {"value", e.value}} {
		if a[1] != "" {
			fmt.Fprintf(b, ` %s="%s"`, a[0], escape(a[1]))
		}
	}
	fmt.Fprintf(b, ` enabled="%t" visible="%t" accessible="%t"`, e.enabled, e.visible, e.accessible)
	if e.selected {
		b.WriteString(` selected="true"`)
	}
	fmt.Fprintf(b, ` x="%d" y="%d" width="%d" height="%d" index="%d"`, e.rect[0], e.rect[1], e.rect[2], e.rect[3], e.index)
	if leaf {
		b.WriteString("/>\n")
	} else {
		b.WriteString(">\n")
	}
}

func escape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// lockScreenSource is the source of the lock screen: SpringBoard showing
// the time and how to unlock.
func (p *Phone) lockScreenSource() string {
	w, h := p.opts.WidthPt, p.opts.HeightPt
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	full := [4]int{0, 0, w, h}
	writeElement(&b, 0, "XCUIElementTypeApplication", elem{name: "SpringBoard", label: "SpringBoard", enabled: true, visible: true, rect: full}, false)
	writeElement(&b, 1, "XCUIElementTypeWindow", elem{enabled: true, visible: true, rect: full}, false)
	writeElement(&b, 2, "XCUIElementTypeOther", elem{name: "lock screen", enabled: true, visible: true, rect: full}, false)
	writeElement(&b, 3, "XCUIElementTypeStaticText", elem{name: "time", label: "9:41", value: "9:41", enabled: true, visible: true, accessible: true, rect: [4]int{w / 4, h / 6, w / 2, h / 10}}, true)
	writeElement(&b, 3, "XCUIElementTypeStaticText", elem{name: "Swipe up to open", label: "Swipe up to open", value: "Swipe up to open", enabled: true, visible: true, accessible: true, rect: [4]int{w / 4, h * 9 / 10, w / 2, h / 30}, index: 1}, true)
	b.WriteString("    </XCUIElementTypeOther>\n  </XCUIElementTypeWindow>\n</XCUIElementTypeApplication>\n")
	return b.String()
}

// lockScreenPNG renders the lock screen in pixels: a dark wallpaper, the
// clock's block, a padlock and the home indicator.
func (p *Phone) lockScreenPNG() ([]byte, error) {
	w, h := p.opts.WidthPt*p.opts.Scale, p.opts.HeightPt*p.opts.Scale
	pal := color.Palette{color.RGBA{0x10, 0x14, 0x2c, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff}, color.RGBA{0x3a, 0x40, 0x6a, 0xff}}
	img := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	fill := func(r image.Rectangle, c uint8) {
		r = r.Intersect(img.Rect)
		for y := r.Min.Y; y < r.Max.Y; y++ {
			row := img.Pix[y*img.Stride+r.Min.X : y*img.Stride+r.Max.X]
			for i := range row {
				row[i] = c
			}
		}
	}
	// The clock.
	fill(image.Rect(w/4, h/6, w*3/4, h/6+h/10), 2)
	// The padlock: its body and shackle.
	fill(image.Rect(w/2-w/20, h/12, w/2+w/20, h/12+w/14), 1)
	fill(image.Rect(w/2-w/32, h/12-w/24, w/2+w/32, h/12), 1)
	fill(image.Rect(w/2-w/64, h/12-w/40, w/2+w/64, h/12), 0)
	// The home indicator.
	fill(image.Rect(w/3, h-h/60, w*2/3, h-h/60+max(h/400, 2)), 1)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
