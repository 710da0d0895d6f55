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
)

// simScreen is a snapshot of a Simulated phone's screen state.
type simScreen struct {
	w, h      int
	frame     int64
	app       string
	typedLen  int
	tap       *image.Point
	swipe     *[2]image.Point
	recording bool
}

// Palette indexes.
const (
	pxBlack = iota
	pxWhite
	pxStatus
	pxRed
	pxAmber
	pxField
	pxInk
	pxBackground // first of 8 background colours
)

var simPalette = color.Palette{
	color.RGBA{0x00, 0x00, 0x00, 0xff},
	color.RGBA{0xff, 0xff, 0xff, 0xff},
	color.RGBA{0x21, 0x21, 0x29, 0xff},
	color.RGBA{0xe5, 0x39, 0x35, 0xff},
	color.RGBA{0xff, 0xb3, 0x00, 0xff},
	color.RGBA{0xf5, 0xf5, 0xf5, 0xff},
	color.RGBA{0x42, 0x42, 0x42, 0xff},
	// backgrounds
	color.RGBA{0xbb, 0xde, 0xfb, 0xff},
	color.RGBA{0xc8, 0xe6, 0xc9, 0xff},
	color.RGBA{0xff, 0xe0, 0xb2, 0xff},
	color.RGBA{0xe1, 0xbe, 0xe7, 0xff},
	color.RGBA{0xb2, 0xeb, 0xf2, 0xff},
	color.RGBA{0xff, 0xcd, 0xd2, 0xff},
	color.RGBA{0xf0, 0xf4, 0xc3, 0xff},
	color.RGBA{0xd7, 0xcc, 0xc8, 0xff},
}

var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed}

func (sc simScreen) png() ([]byte, error) {
	var buf bytes.Buffer
	if err := pngEncoder.Encode(&buf, sc.render()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appColor(app string) uint8 {
	h := fnv.New32a()
	h.Write([]byte(app))
	return pxBackground + uint8(h.Sum32()%8)
}

// Layout of the simulated screen.
func (sc simScreen) statusBar() int { return max(sc.h/20, 8) }

func (sc simScreen) field() image.Rectangle {
	return image.Rect(sc.w/10, sc.h*3/10, sc.w*9/10, sc.h*3/10+max(sc.h/16, 4))
}

func (sc simScreen) render() *image.Paletted {
	img := image.NewPaletted(image.Rect(0, 0, sc.w, sc.h), simPalette)
	bg := appColor(sc.app)
	for i := range img.Pix {
		img.Pix[i] = bg
	}
	sb := sc.statusBar()
	fillRect(img, image.Rect(0, 0, sc.w, sb), pxStatus)

	// Frame counter, seven-segment digits in the status bar.
	dh := sb * 3 / 4
	dw := max(dh/2, 3)
	t := max(dh/8, 1)
	x := sb / 2
	for _, r := range strconv.FormatInt(sc.frame, 10) {
		drawDigit(img, x, (sb-dh)/2, dw, dh, t, int(r-'0'), pxWhite)
		x += dw + 2*t
	}
	if sc.recording {
		fillCircle(img, sc.w-sb, sb/2, sb/4, pxRed)
	}

	// Text field with one ink cell per typed character (capped).
	f := sc.field()
	fillRect(img, f, pxField)
	cell := max(f.Dx()/40, 1)
	n := min(sc.typedLen, f.Dx()/cell-1)
	pad := max(f.Dy()/4, 1)
	if n > 0 {
		fillRect(img, image.Rect(f.Min.X+cell/2, f.Min.Y+pad, f.Min.X+cell/2+n*cell, f.Max.Y-pad), pxInk)
	}

	if sc.swipe != nil {
		drawLine(img, sc.swipe[0], sc.swipe[1], max(sc.w/120, 2), pxAmber)
	}
	if sc.tap != nil {
		r := max(sc.w/24, 3)
		fillCircle(img, sc.tap.X, sc.tap.Y, r, pxRed)
		fillCircle(img, sc.tap.X, sc.tap.Y, r/3, pxWhite)
	}
	return img
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

func fillCircle(img *image.Paletted, cx, cy, r int, c uint8) {
	for y := cy - r; y <= cy+r; y++ {
		for x := cx - r; x <= cx+r; x++ {
			dx, dy := x-cx, y-cy
			if dx*dx+dy*dy <= r*r && (image.Point{X: x, Y: y}).In(img.Rect) {
				img.Pix[img.PixOffset(x, y)] = c
			}
		}
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

// Segments a..g as bits 0..6.
var sevenSeg = [10]uint8{0x3F, 0x06, 0x5B, 0x4F, 0x66, 0x6D, 0x7D, 0x07, 0x7F, 0x6F}

func drawDigit(img *image.Paletted, x, y, w, h, t, d int, c uint8) {
	if d < 0 || d > 9 {
		return
	}
	m := sevenSeg[d]
	mid := h / 2
	segs := [7]image.Rectangle{
		image.Rect(t, 0, w-t, t),               // a
		image.Rect(w-t, t, w, mid),             // b
		image.Rect(w-t, mid, w, h-t),           // c
		image.Rect(t, h-t, w-t, h),             // d
		image.Rect(0, mid, t, h-t),             // e
		image.Rect(0, t, t, mid),               // f
		image.Rect(t, mid-t/2, w-t, mid+t-t/2), // g
	}
	for i, r := range segs {
		if m&(1<<i) != 0 {
			fillRect(img, r.Add(image.Pt(x, y)), c)
		}
	}
}

// uiXML renders the hierarchy the way uiautomator dump does.
func (sc simScreen) uiXML(typed string) []byte {
	var b bytes.Buffer
	b.WriteString("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>")
	b.WriteString(`<hierarchy rotation="0">`)
	root := image.Rect(0, 0, sc.w, sc.h)
	writeNode(&b, 0, "android.widget.FrameLayout", "", "", sc.app, root, nodeFlags{}, false)
	sb := sc.statusBar()
	writeNode(&b, 0, "android.widget.TextView", "sim:id/frame", "frame "+strconv.FormatInt(sc.frame, 10), sc.app,
		image.Rect(0, 0, sc.w, sb), nodeFlags{}, true)
	writeNode(&b, 1, "android.widget.EditText", "sim:id/input", typed, sc.app,
		sc.field(), nodeFlags{clickable: true, focusable: true, focused: true}, true)
	f := sc.field()
	btn := image.Rect(f.Min.X, f.Max.Y+f.Dy(), f.Max.X, f.Max.Y+2*f.Dy())
	writeNode(&b, 2, "android.widget.Button", "sim:id/ok", "OK", sc.app,
		btn, nodeFlags{clickable: true, focusable: true}, true)
	if sc.tap != nil {
		writeNode(&b, 3, "android.widget.TextView", "sim:id/last_tap",
			fmt.Sprintf("tap %d,%d", sc.tap.X, sc.tap.Y), sc.app, image.Rect(0, sb, sc.w, 2*sb), nodeFlags{}, true)
	}
	b.WriteString("</node></hierarchy>")
	return b.Bytes()
}

type nodeFlags struct{ clickable, focusable, focused bool }

func writeNode(b *bytes.Buffer, index int, class, id, text, pkg string, r image.Rectangle, f nodeFlags, leaf bool) {
	fmt.Fprintf(b, `<node index="%d" text="%s" resource-id="%s" class="%s" package="%s" content-desc="" `+
		`checkable="false" checked="false" clickable="%t" enabled="true" focusable="%t" focused="%t" `+
		`scrollable="false" long-clickable="false" password="false" selected="false" bounds="[%d,%d][%d,%d]"`,
		index, attr(text), attr(id), attr(class), attr(pkg), f.clickable, f.focusable, f.focused,
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
