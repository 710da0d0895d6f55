package capture

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"
	"sync"
)

// simApp is an app on the simulated phone.
type simApp struct {
	pkg   string
	label string
	color color.RGBA
}

// simHomeApps are the launcher's grid, in order; simDockApps its dock.
var (
	simHomeApps = []simApp{
		{"com.android.settings", "Settings", color.RGBA{0x54, 0x6e, 0x7a, 0xff}},
		{"com.android.chrome", "Chrome", color.RGBA{0x1e, 0x88, 0xe5, 0xff}},
		{"com.google.android.gm", "Gmail", color.RGBA{0xd9, 0x30, 0x25, 0xff}},
		{"com.google.android.apps.maps", "Maps", color.RGBA{0x34, 0xa8, 0x53, 0xff}},
		{"com.google.android.youtube", "YouTube", color.RGBA{0xff, 0x00, 0x33, 0xff}},
		{"com.android.vending", "Play Store", color.RGBA{0x01, 0x87, 0x5f, 0xff}},
		{"com.google.android.apps.photos", "Photos", color.RGBA{0xfb, 0xbc, 0x04, 0xff}},
		{"com.google.android.calendar", "Calendar", color.RGBA{0x42, 0x85, 0xf4, 0xff}},
		{"com.android.contacts", "Contacts", color.RGBA{0x3f, 0x51, 0xb5, 0xff}},
		{"com.android.calculator2", "Calculator", color.RGBA{0x60, 0x7d, 0x8b, 0xff}},
		{"com.android.deskclock", "Clock", color.RGBA{0x7b, 0x1f, 0xa2, 0xff}},
		{"com.example.shop", "Shop", color.RGBA{0xef, 0x6c, 0x00, 0xff}},
	}
	simDockApps = []simApp{
		{"com.android.dialer", "Phone", color.RGBA{0x0f, 0x9d, 0x58, 0xff}},
		{"com.google.android.apps.messaging", "Messages", color.RGBA{0x1a, 0x73, 0xe8, 0xff}},
		{"com.android.camera2", "Camera", color.RGBA{0x26, 0x32, 0x38, 0xff}},
		{"com.android.documentsui", "Files", color.RGBA{0x00, 0x89, 0x7b, 0xff}},
	}
)

// Palette layout: fixed colours, the wallpaper gradient, then two entries
// (primary, dark) per app colour.
const (
	pxBlack = iota
	pxWhite
	pxStatus
	pxRed
	pxAmber
	pxField
	pxInk
	pxGrey
	pxGreyLight
	pxRipple
	pxSelected
	pxNavBar
	pxDock
	pxShadow
	pxWallpaper    // first of simWallShades
	simWallShades  = 32
	pxAppColors    = pxWallpaper + simWallShades
	simOtherColors = 8 // colours of apps not on the launcher, by hash
	simAppSlots    = 16 + simOtherColors
	simPaletteSize = pxAppColors + 2*simAppSlots
)

var _ [256 - simPaletteSize]struct{} // the palette fits in a byte

var simOtherPalette = []color.RGBA{
	{0x8e, 0x24, 0xaa, 0xff}, {0x00, 0x96, 0x88, 0xff}, {0xf4, 0x51, 0x1e, 0xff}, {0x3e, 0x27, 0x23, 0xff},
	{0x5c, 0x6b, 0xc0, 0xff}, {0xc0, 0xca, 0x33, 0xff}, {0xec, 0x40, 0x7a, 0xff}, {0x00, 0x83, 0x8f, 0xff},
}

var simPalette = func() color.Palette {
	p := color.Palette{
		color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
		color.RGBA{0xff, 0xff, 0xff, 0xff}, // white
		color.RGBA{0x20, 0x21, 0x24, 0xff}, // status bar
		color.RGBA{0xe5, 0x39, 0x35, 0xff}, // red
		color.RGBA{0xff, 0xb3, 0x00, 0xff}, // amber
		color.RGBA{0xf1, 0xf3, 0xf4, 0xff}, // field
		color.RGBA{0x20, 0x21, 0x24, 0xff}, // ink
		color.RGBA{0x9a, 0xa0, 0xa6, 0xff}, // grey
		color.RGBA{0xda, 0xdc, 0xe0, 0xff}, // light grey
		color.RGBA{0xc8, 0xd7, 0xf5, 0xff}, // ripple
		color.RGBA{0xe8, 0xf0, 0xfe, 0xff}, // selected row
		color.RGBA{0x10, 0x10, 0x12, 0xff}, // navigation bar
		color.RGBA{0x2a, 0x2f, 0x45, 0xff}, // dock
		color.RGBA{0xbd, 0xc1, 0xc6, 0xff}, // shadow
	}
	// Wallpaper: deep indigo at the top to teal at the bottom.
	top, bottom := color.RGBA{0x1a, 0x23, 0x7e, 0xff}, color.RGBA{0x00, 0x89, 0x7b, 0xff}
	for i := range simWallShades {
		mix := func(a, b uint8) uint8 { return uint8((int(a)*(simWallShades-1-i) + int(b)*i) / (simWallShades - 1)) }
		p = append(p, color.RGBA{mix(top.R, bottom.R), mix(top.G, bottom.G), mix(top.B, bottom.B), 0xff})
	}
	apps := append(append([]simApp(nil), simHomeApps...), simDockApps...)
	for i := range 16 {
		c := color.RGBA{0x60, 0x60, 0x60, 0xff}
		if i < len(apps) {
			c = apps[i].color
		}
		p = append(p, c, darken(c))
	}
	for _, c := range simOtherPalette {
		p = append(p, c, darken(c))
	}
	return p
}()

func darken(c color.RGBA) color.RGBA {
	return color.RGBA{uint8(int(c.R) * 7 / 10), uint8(int(c.G) * 7 / 10), uint8(int(c.B) * 7 / 10), 0xff}
}

// appInfo returns the label and palette index (primary; dark is +1) of pkg.
func appInfo(pkg string) (label string, colour uint8) {
	for i, a := range append(append([]simApp(nil), simHomeApps...), simDockApps...) {
		if a.pkg == pkg {
			return a.label, uint8(pxAppColors + 2*i)
		}
	}
	h := fnv.New32a()
	h.Write([]byte(pkg))
	label = pkg[strings.LastIndexByte(pkg, '.')+1:]
	if label != "" {
		label = strings.ToUpper(label[:1]) + label[1:]
	}
	return label, uint8(pxAppColors + 2*(16+int(h.Sum32()%simOtherColors)))
}

// simScreen is a snapshot of a Simulated phone's screen state.
type simScreen struct {
	w, h      int
	frame     int64
	app       string
	typed     string
	selected  int // list row last tapped in an app, -1 for none
	tap       *image.Point
	swipe     *[2]image.Point
	recording bool
	catalogue []SimProduct // the shop's products, when it is in front
	scroll    int
}

// pngEncoder encodes the screenshots of every Simulated phone, reusing its
// compressor state between them: a new one per screenshot was most of the
// allocations of a process that runs simulated phones (the lab, the
// benchmarks).
var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngBuffers{}}

// pngBuffers is a png.EncoderBufferPool over a sync.Pool.
type pngBuffers struct{ p sync.Pool }

func (b *pngBuffers) Get() *png.EncoderBuffer {
	eb, _ := b.p.Get().(*png.EncoderBuffer)
	return eb
}

func (b *pngBuffers) Put(eb *png.EncoderBuffer) { b.p.Put(eb) }

func (sc simScreen) png() ([]byte, error) {
	var buf bytes.Buffer
	if err := pngEncoder.Encode(&buf, sc.render()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layout, in pixels, derived from the screen size so any size renders.
func (sc simScreen) statusBar() int { return max(sc.h*3/80, 6) }
func (sc simScreen) navBar() int    { return max(sc.h/16, 6) }
func (sc simScreen) textPx() int    { return max(sc.w/360, 1) }

// simTarget is something on screen a tap can hit.
type simTarget struct {
	kind  string // "app" (launcher icon), "row", "field", "button", "fab"
	pkg   string
	label string
	index int
	rect  image.Rectangle
}

// launcherTargets returns the icons of the home grid and the dock.
func (sc simScreen) launcherTargets() []simTarget {
	var out []simTarget
	cols := 4
	cellW := sc.w / cols
	icon := max(cellW*11/20, 2)
	labelH := 9 * sc.textPx()
	cellH := icon + labelH + max(sc.h/40, 1)
	top := sc.statusBar() + max(sc.h/7, 2)
	for i, a := range simHomeApps {
		x := (i%cols)*cellW + (cellW-icon)/2
		y := top + (i/cols)*cellH
		out = append(out, simTarget{kind: "app", pkg: a.pkg, label: a.label, index: i, rect: image.Rect(x, y, x+icon, y+icon+labelH)})
	}
	dockTop := sc.h - sc.navBar() - icon - max(sc.h/40, 1)
	for i, a := range simDockApps {
		x := i*cellW + (cellW-icon)/2
		out = append(out, simTarget{kind: "app", pkg: a.pkg, label: a.label, index: len(simHomeApps) + i, rect: image.Rect(x, dockTop, x+icon, dockTop+icon)})
	}
	return out
}

func (sc simScreen) toolbar() image.Rectangle {
	sb := sc.statusBar()
	return image.Rect(0, sb, sc.w, sb+max(sc.h/12, 4))
}

func (sc simScreen) field() image.Rectangle {
	tb := sc.toolbar()
	y := tb.Max.Y + max(sc.h/40, 1)
	return image.Rect(sc.w/20, y, sc.w*19/20, y+max(sc.h/16, 4))
}

func (sc simScreen) button() image.Rectangle {
	f := sc.field()
	y := f.Max.Y + max(sc.h/80, 1)
	return image.Rect(sc.w*13/20, y, sc.w*19/20, y+max(sc.h/20, 3))
}

func (sc simScreen) fab() (image.Point, int) {
	r := max(sc.w/14, 2)
	return image.Pt(sc.w-r*2, sc.h-sc.navBar()-r*2), r
}

// appTargets returns the widgets of an app screen.
func (sc simScreen) appTargets() []simTarget {
	out := []simTarget{
		{kind: "field", label: "Search", rect: sc.field()},
		{kind: "button", label: "OK", rect: sc.button()},
	}
	rowH, top := sc.rows()
	for i := 0; top+(i+1)*rowH <= sc.h-sc.navBar(); i++ {
		label := fmt.Sprintf("Item %d", i+1)
		if len(sc.catalogue) > 0 {
			if sc.scroll+i >= len(sc.catalogue) {
				break
			}
			label = sc.catalogue[sc.scroll+i].Name
		}
		out = append(out, simTarget{kind: "row", label: label, index: i,
			rect: image.Rect(0, top+i*rowH, sc.w, top+(i+1)*rowH)})
	}
	c, r := sc.fab()
	out = append(out, simTarget{kind: "fab", label: "New", rect: image.Rect(c.X-r, c.Y-r, c.X+r, c.Y+r)})
	return out
}

// rows returns the height of a list row and the top of the list.
func (sc simScreen) rows() (rowH, top int) {
	rowH = max(sc.h/11, 3)
	if len(sc.catalogue) > 0 {
		// A shop's rows are as tall as a sixth of the screen's width (a
		// fixed height in dp on a real phone): a screen with a taller
		// aspect shows more of them.
		rowH = max(sc.w/6, 3)
	}
	return rowH, sc.button().Max.Y + max(sc.h/60, 1)
}

// visibleRows is how many list rows fit on the screen.
func (sc simScreen) visibleRows() int {
	rowH, top := sc.rows()
	return max((sc.h-sc.navBar()-top)/rowH, 0)
}

// hit returns what a tap at p lands on, the topmost target first.
func (sc simScreen) hit(p image.Point) (simTarget, bool) {
	ts := sc.appTargets()
	if sc.app == SimLauncher {
		ts = sc.launcherTargets()
	}
	for i := len(ts) - 1; i >= 0; i-- {
		if p.In(ts[i].rect) {
			return ts[i], true
		}
	}
	return simTarget{}, false
}

func (sc simScreen) render() *image.Paletted {
	img := image.NewPaletted(image.Rect(0, 0, sc.w, sc.h), simPalette)
	if sc.app == SimLauncher {
		sc.renderLauncher(img)
	} else {
		sc.renderApp(img)
	}
	sc.renderStatusBar(img)
	sc.renderNavBar(img)
	if sc.swipe != nil {
		drawLine(img, sc.swipe[0], sc.swipe[1], max(sc.w/120, 2), pxAmber)
	}
	if sc.tap != nil {
		// A touch ripple: a pale disc with a ring and the touch point.
		r := max(sc.w/16, 3)
		fillCircle(img, sc.tap.X, sc.tap.Y, r, pxRipple)
		strokeCircle(img, sc.tap.X, sc.tap.Y, r, max(r/8, 1), pxWhite)
		fillCircle(img, sc.tap.X, sc.tap.Y, max(r/5, 1), pxWhite)
	}
	return img
}

func (sc simScreen) renderStatusBar(img *image.Paletted) {
	sb := sc.statusBar()
	bg := uint8(pxWallpaper)
	if sc.app != SimLauncher {
		_, c := appInfo(sc.app)
		bg = c + 1
	}
	fillRect(img, image.Rect(0, 0, sc.w, sb), bg)
	// Clock: hours and minutes from the frame counter, so every screenshot
	// differs; then the frame number itself.
	px := max(sb/12, 1)
	y := (sb - 7*px) / 2
	clock := fmt.Sprintf("%02d:%02d", 9+sc.frame/60%12, sc.frame%60)
	drawText(img, sb/2, y, px, clock, pxWhite)
	drawText(img, sb/2+textWidth(clock, px)+3*px, y, px, "#"+strconv.FormatInt(sc.frame, 10), pxGreyLight)
	// Battery and signal at the right.
	bw, bh := 5*px, 8*px
	bx := sc.w - sb/2 - bw
	fillRect(img, image.Rect(bx, y, bx+bw, y+bh), pxWhite)
	fillRect(img, image.Rect(bx+px, y+px, bx+bw-px, y+3*px), bg)
	for i := range 4 {
		x := bx - 3*px - (4-i)*2*px
		fillRect(img, image.Rect(x, y+bh-(i+1)*2*px, x+px+px/2+1, y+bh), pxWhite)
	}
	if sc.recording {
		fillCircle(img, bx-14*px, sb/2, max(sb/5, 1), pxRed)
	}
}

func (sc simScreen) renderNavBar(img *image.Paletted) {
	nb := sc.navBar()
	top := sc.h - nb
	bg := uint8(pxNavBar)
	if sc.app == SimLauncher {
		bg = pxWallpaper + simWallShades - 1
	}
	fillRect(img, image.Rect(0, top, sc.w, sc.h), bg)
	cy := top + nb/2
	s := max(nb/5, 1)
	// back (triangle), home (circle), recents (square)
	for i := 0; i < s*2; i++ {
		h := i / 2
		fillRect(img, image.Rect(sc.w/4-s+i, cy-h, sc.w/4-s+i+1, cy+h+1), pxWhite)
	}
	strokeCircle(img, sc.w/2, cy, s, max(s/4, 1), pxWhite)
	strokeRect(img, image.Rect(sc.w*3/4-s, cy-s, sc.w*3/4+s, cy+s), max(s/4, 1), pxWhite)
}

func (sc simScreen) renderLauncher(img *image.Paletted) {
	// Wallpaper gradient.
	for y := 0; y < sc.h; y++ {
		shade := uint8(pxWallpaper + y*simWallShades/max(sc.h, 1))
		row := img.Pix[y*img.Stride : y*img.Stride+sc.w]
		for i := range row {
			row[i] = shade
		}
	}
	px := sc.textPx()
	// Search pill.
	sb := sc.statusBar()
	pill := image.Rect(sc.w/14, sb+sc.h/30, sc.w*13/14, sb+sc.h/30+max(sc.h/22, 2))
	fillRoundRect(img, pill, pill.Dy()/2, pxWhite)
	drawText(img, pill.Min.X+pill.Dy()/2, pill.Min.Y+(pill.Dy()-7*px)/2, px, "Search apps and web", pxGrey)
	// Dock background.
	ts := sc.launcherTargets()
	if n := len(ts); n > 0 {
		d := ts[n-1].rect
		pad := max(sc.h/80, 1)
		fillRoundRect(img, image.Rect(sc.w/30, d.Min.Y-pad, sc.w-sc.w/30, d.Max.Y+pad), max(d.Dy()/3, 1), pxDock)
	}
	for _, t := range ts {
		_, c := appInfo(t.pkg)
		icon := image.Rect(t.rect.Min.X, t.rect.Min.Y, t.rect.Max.X, t.rect.Min.Y+t.rect.Dx())
		fillRoundRect(img, icon.Add(image.Pt(0, max(px, 1))), icon.Dx()/4, c+1) // shadow
		fillRoundRect(img, icon, icon.Dx()/4, c)
		g := max(icon.Dx()/14, 1)
		drawTextCentered(img, (icon.Min.X+icon.Max.X)/2, icon.Min.Y+(icon.Dy()-7*g)/2, g, t.label[:1], pxWhite)
		if t.index < len(simHomeApps) {
			drawTextCentered(img, (icon.Min.X+icon.Max.X)/2, icon.Max.Y+2*px, px, t.label, pxWhite)
		}
	}
}

func (sc simScreen) renderApp(img *image.Paletted) {
	fillRect(img, img.Rect, pxWhite)
	label, c := appInfo(sc.app)
	px := sc.textPx()
	tb := sc.toolbar()
	fillRect(img, tb, c)
	fillRect(img, image.Rect(0, tb.Max.Y, sc.w, tb.Max.Y+max(px, 1)), pxShadow)
	drawText(img, sc.w/20, tb.Min.Y+(tb.Dy()-14*px)/2, 2*px, label, pxWhite)

	for _, t := range sc.appTargets() {
		switch t.kind {
		case "field":
			fillRoundRect(img, t.rect, t.rect.Dy()/2, pxField)
			text := sc.typed
			if text == "" {
				drawText(img, t.rect.Min.X+t.rect.Dy()/2, t.rect.Min.Y+(t.rect.Dy()-7*px)/2, px, "Search", pxGrey)
			}
			// Keep the end of the text visible.
			room := max((t.rect.Dx()-t.rect.Dy())/(6*px), 1)
			if r := []rune(text); len(r) > room {
				text = string(r[len(r)-room:])
			}
			x := t.rect.Min.X + t.rect.Dy()/2
			drawText(img, x, t.rect.Min.Y+(t.rect.Dy()-7*px)/2, px, text, pxInk)
			cx := x + textWidth(text, px) + px
			fillRect(img, image.Rect(cx, t.rect.Min.Y+t.rect.Dy()/4, cx+max(px, 1), t.rect.Max.Y-t.rect.Dy()/4), c)
		case "button":
			fillRoundRect(img, t.rect, t.rect.Dy()/4, c)
			drawTextCentered(img, (t.rect.Min.X+t.rect.Max.X)/2, t.rect.Min.Y+(t.rect.Dy()-7*px)/2, px, t.label, pxWhite)
		case "row":
			r := t.rect
			if t.index == sc.selected {
				fillRect(img, r, pxSelected)
			}
			fillRect(img, image.Rect(r.Min.X+sc.w/20, r.Max.Y-1, r.Max.X, r.Max.Y), pxGreyLight)
			ar := max(r.Dy()*3/10, 1)
			ax := sc.w/20 + ar
			fillCircle(img, ax, (r.Min.Y+r.Max.Y)/2, ar, uint8(pxAppColors+2*((t.index*5)%simAppSlots)))
			tx := ax + ar + sc.w/24
			drawText(img, tx, r.Min.Y+r.Dy()/4, px, t.label, pxInk)
			if len(sc.catalogue) > 0 {
				drawText(img, tx, r.Min.Y+r.Dy()*3/5, px, sc.catalogue[sc.scroll+t.index].Price, pxRed)
				continue
			}
			lineW := (sc.w - tx - sc.w/20) * (5 + (t.index*3)%5) / 10
			fillRoundRect(img, image.Rect(tx, r.Min.Y+r.Dy()*3/5, tx+lineW, r.Min.Y+r.Dy()*3/5+max(r.Dy()/10, 1)), max(r.Dy()/20, 0), pxGreyLight)
		case "fab":
			p, rad := sc.fab()
			fillCircle(img, p.X, p.Y+max(px, 1), rad, pxShadow)
			fillCircle(img, p.X, p.Y, rad, c+1)
			drawTextCentered(img, p.X, p.Y-7*max(rad/8, 1)/2, max(rad/8, 1), "+", pxWhite)
		}
	}
}

func fillRect(img *image.Paletted, r image.Rectangle, c uint8) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		row := img.Pix[img.PixOffset(r.Min.X, y):img.PixOffset(r.Max.X, y)]
		for i := range row {
			row[i] = c
		}
	}
}

func strokeRect(img *image.Paletted, r image.Rectangle, t int, c uint8) {
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+t), c)
	fillRect(img, image.Rect(r.Min.X, r.Max.Y-t, r.Max.X, r.Max.Y), c)
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+t, r.Max.Y), c)
	fillRect(img, image.Rect(r.Max.X-t, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// isqrt returns the integer square root of v >= 0.
func isqrt(v int) int {
	if v <= 0 {
		return 0
	}
	x := v
	y := (x + 1) / 2
	for y < x {
		x = y
		y = (x + v/x) / 2
	}
	return x
}

func fillCircle(img *image.Paletted, cx, cy, r int, c uint8) {
	for dy := -r; dy <= r; dy++ {
		dx := isqrt(r*r - dy*dy)
		fillRect(img, image.Rect(cx-dx, cy+dy, cx+dx+1, cy+dy+1), c)
	}
}

func strokeCircle(img *image.Paletted, cx, cy, r, t int, c uint8) {
	inner := max(r-t, 0)
	for dy := -r; dy <= r; dy++ {
		dx := isqrt(r*r - dy*dy)
		if abs(dy) >= inner {
			fillRect(img, image.Rect(cx-dx, cy+dy, cx+dx+1, cy+dy+1), c)
			continue
		}
		ix := isqrt(inner*inner - dy*dy)
		fillRect(img, image.Rect(cx-dx, cy+dy, cx-ix, cy+dy+1), c)
		fillRect(img, image.Rect(cx+ix+1, cy+dy, cx+dx+1, cy+dy+1), c)
	}
}

func fillRoundRect(img *image.Paletted, r image.Rectangle, rad int, c uint8) {
	rad = min(rad, r.Dx()/2, r.Dy()/2)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		inset := 0
		var d int
		switch {
		case y < r.Min.Y+rad:
			d = r.Min.Y + rad - y
		case y >= r.Max.Y-rad:
			d = y - (r.Max.Y - rad - 1)
		}
		if d > 0 {
			inset = rad - isqrt(rad*rad-d*d)
		}
		fillRect(img, image.Rect(r.Min.X+inset, y, r.Max.X-inset, y+1), c)
	}
}

func drawLine(img *image.Paletted, a, b image.Point, thick int, c uint8) {
	dx, dy := b.X-a.X, b.Y-a.Y
	steps := max(abs(dx), abs(dy), 1)
	for i := 0; i <= steps; i++ {
		x := a.X + dx*i/steps
		y := a.Y + dy*i/steps
		fillRect(img, image.Rect(x-thick/2, y-thick/2, x-thick/2+thick, y-thick/2+thick), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// uiXML renders the hierarchy the way uiautomator dump does: the launcher's
// icons, or the app's toolbar, text field, button, list rows and button.
func (sc simScreen) uiXML() []byte {
	var b bytes.Buffer
	b.WriteString("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>")
	b.WriteString(`<hierarchy rotation="0">`)
	writeNode(&b, 0, "android.widget.FrameLayout", "", "", "", sc.app, image.Rect(0, 0, sc.w, sc.h), nodeFlags{}, false)
	if sc.app == SimLauncher {
		for i, t := range sc.launcherTargets() {
			writeNode(&b, i, "android.widget.TextView", "", t.label, t.label, sc.app, t.rect, nodeFlags{clickable: true, focusable: true}, true)
		}
	} else {
		label, _ := appInfo(sc.app)
		writeNode(&b, 0, "android.widget.TextView", sc.app+":id/title", label, "", sc.app, sc.toolbar(), nodeFlags{}, true)
		for i, t := range sc.appTargets() {
			switch t.kind {
			case "field":
				writeNode(&b, i+1, "android.widget.EditText", sc.app+":id/input", sc.typed, "", sc.app, t.rect, nodeFlags{clickable: true, focusable: true, focused: true}, true)
			case "button":
				writeNode(&b, i+1, "android.widget.Button", sc.app+":id/ok", t.label, "", sc.app, t.rect, nodeFlags{clickable: true, focusable: true}, true)
			case "row":
				if len(sc.catalogue) > 0 {
					// A product: its name above its price, in a clickable row.
					r := t.rect
					x0 := r.Min.X + sc.w/20
					writeNode(&b, i+1, "android.widget.LinearLayout", sc.app+":id/product", "", "", sc.app, r, nodeFlags{clickable: true, selected: t.index == sc.selected}, false)
					writeNode(&b, 0, "android.widget.TextView", sc.app+":id/name", t.label, "", sc.app, image.Rect(x0, r.Min.Y+r.Dy()/10, r.Max.X-sc.w/20, r.Min.Y+r.Dy()/2), nodeFlags{}, true)
					writeNode(&b, 1, "android.widget.TextView", sc.app+":id/price", sc.catalogue[sc.scroll+t.index].Price, "", sc.app, image.Rect(x0, r.Min.Y+r.Dy()/2, r.Min.X+sc.w*3/5, r.Max.Y-r.Dy()/10), nodeFlags{}, true)
					b.WriteString("</node>")
					continue
				}
				writeNode(&b, i+1, "android.widget.TextView", sc.app+":id/item", t.label, "", sc.app, t.rect, nodeFlags{clickable: true, selected: t.index == sc.selected}, true)
			case "fab":
				writeNode(&b, i+1, "android.widget.ImageButton", sc.app+":id/fab", "", t.label, sc.app, t.rect, nodeFlags{clickable: true, focusable: true}, true)
			}
		}
	}
	b.WriteString("</node></hierarchy>")
	return b.Bytes()
}

type nodeFlags struct{ clickable, focusable, focused, selected bool }

func writeNode(b *bytes.Buffer, index int, class, id, text, desc, pkg string, r image.Rectangle, f nodeFlags, leaf bool) {
	fmt.Fprintf(b, `<node index="%d" text="%s" resource-id="%s" class="%s" package="%s" content-desc="%s" `+
		`checkable="false" checked="false" clickable="%t" enabled="true" focusable="%t" focused="%t" `+
		`scrollable="false" long-clickable="false" password="false" selected="%t" bounds="[%d,%d][%d,%d]"`,
		index, attr(text), attr(id), attr(class), attr(pkg), attr(desc), f.clickable, f.focusable, f.focused, f.selected,
		r.Min.X, r.Min.Y, r.Max.X, r.Max.Y)
	if leaf {
		b.WriteString(" />")
	} else {
		b.WriteString(">")
	}
}

func attr(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
