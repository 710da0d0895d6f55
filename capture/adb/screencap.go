package adb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"io"
)

// Pixel formats screencap writes (android PixelFormat values).
const (
	FormatRGBA8888 = 1
	FormatRGBX8888 = 2
	FormatRGB888   = 3
	FormatRGB565   = 4
	FormatBGRA8888 = 5
)

// maxScreenSide bounds each screen dimension a header may announce.
const maxScreenSide = 16384

// ScreencapHeader is the header of raw screencap output: width, height and
// pixel format, followed since Android 9 by a colour space. HeaderSize is 12
// or 16.
type ScreencapHeader struct {
	Width, Height int
	Format        int
	ColorSpace    int // 0 unknown, 1 sRGB, 2 Display P3; 0 with a 12-byte header
	HeaderSize    int
}

// BytesPerPixel returns the size of one pixel of format, or 0 when the
// format is not supported.
func BytesPerPixel(format int) int {
	switch format {
	case FormatRGBA8888, FormatRGBX8888, FormatBGRA8888:
		return 4
	case FormatRGB888:
		return 3
	case FormatRGB565:
		return 2
	}
	return 0
}

// ParseScreencapHeader parses the header of a complete raw screencap
// output b. Which header it has (12 or 16 bytes) follows from the total
// length: the pixels are exactly width × height × bytes per pixel.
func ParseScreencapHeader(b []byte) (ScreencapHeader, error) {
	if len(b) < 12 {
		return ScreencapHeader{}, fmt.Errorf("parse screencap header: output is %d bytes, shorter than the 12-byte header", len(b))
	}
	h := ScreencapHeader{
		Width:  int(binary.LittleEndian.Uint32(b[0:])),
		Height: int(binary.LittleEndian.Uint32(b[4:])),
		Format: int(binary.LittleEndian.Uint32(b[8:])),
	}
	if h.Width <= 0 || h.Height <= 0 || h.Width > maxScreenSide || h.Height > maxScreenSide {
		return ScreencapHeader{}, fmt.Errorf("parse screencap header: implausible size %dx%d", h.Width, h.Height)
	}
	bpp := BytesPerPixel(h.Format)
	if bpp == 0 {
		return ScreencapHeader{}, fmt.Errorf("parse screencap header: unsupported pixel format %d (supported: 1 RGBA_8888, 2 RGBX_8888, 3 RGB_888, 4 RGB_565, 5 BGRA_8888)", h.Format)
	}
	pix := int64(h.Width) * int64(h.Height) * int64(bpp)
	switch int64(len(b)) {
	case 12 + pix:
		h.HeaderSize = 12
	case 16 + pix:
		h.HeaderSize = 16
		h.ColorSpace = int(binary.LittleEndian.Uint32(b[12:]))
	default:
		return ScreencapHeader{}, fmt.Errorf("parse screencap header: %dx%d format %d needs %d pixel bytes after a 12- or 16-byte header, output has %d bytes in all",
			h.Width, h.Height, h.Format, pix, len(b))
	}
	return h, nil
}

// DecodeScreencap decodes raw screencap output into an image. It reuses b's
// memory for 4-byte RGBA formats and may modify b.
func DecodeScreencap(b []byte) (image.Image, ScreencapHeader, error) {
	h, err := ParseScreencapHeader(b)
	if err != nil {
		return nil, h, err
	}
	px := b[h.HeaderSize:]
	w, ht := h.Width, h.Height
	rect := image.Rect(0, 0, w, ht)
	switch h.Format {
	case FormatRGBA8888:
		return &image.RGBA{Pix: px, Stride: 4 * w, Rect: rect}, h, nil
	case FormatRGBX8888:
		for i := 3; i < len(px); i += 4 {
			px[i] = 0xff
		}
		return &image.RGBA{Pix: px, Stride: 4 * w, Rect: rect}, h, nil
	case FormatBGRA8888:
		for i := 0; i+3 < len(px); i += 4 {
			px[i], px[i+2] = px[i+2], px[i]
		}
		return &image.RGBA{Pix: px, Stride: 4 * w, Rect: rect}, h, nil
	case FormatRGB888:
		img := image.NewRGBA(rect)
		for i, j := 0, 0; i+2 < len(px); i, j = i+3, j+4 {
			img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = px[i], px[i+1], px[i+2], 0xff
		}
		return img, h, nil
	case FormatRGB565:
		img := image.NewRGBA(rect)
		for i, j := 0, 0; i+1 < len(px); i, j = i+2, j+4 {
			v := uint16(px[i]) | uint16(px[i+1])<<8
			r, g, bl := byte(v>>11&0x1f), byte(v>>5&0x3f), byte(v&0x1f)
			img.Pix[j] = r<<3 | r>>2
			img.Pix[j+1] = g<<2 | g>>4
			img.Pix[j+2] = bl<<3 | bl>>2
			img.Pix[j+3] = 0xff
		}
		return img, h, nil
	}
	return nil, h, fmt.Errorf("decode screencap: unsupported pixel format %d", h.Format)
}

// EncodeScreencapHeader returns the 16-byte header (12 bytes when
// colorSpace < 0) of a raw screencap output.
func EncodeScreencapHeader(w, h, format, colorSpace int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(w))
	b = binary.LittleEndian.AppendUint32(b, uint32(h))
	b = binary.LittleEndian.AppendUint32(b, uint32(format))
	if colorSpace >= 0 {
		b = binary.LittleEndian.AppendUint32(b, uint32(colorSpace))
	}
	return b
}

// ReadScreencap reads raw screencap output from r into one buffer sized
// from its header, so a large screen is not copied while the buffer grows.
// More than limit bytes is an error.
func ReadScreencap(r io.Reader, limit int64) ([]byte, error) {
	head := make([]byte, 12)
	if n, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("read screencap header: got %d of 12 bytes: %w", n, err)
	}
	w := int64(binary.LittleEndian.Uint32(head[0:]))
	h := int64(binary.LittleEndian.Uint32(head[4:]))
	bpp := int64(BytesPerPixel(int(binary.LittleEndian.Uint32(head[8:]))))
	want := 16 + w*h*bpp
	if bpp == 0 || w > maxScreenSide || h > maxScreenSide || want > limit {
		want = 64 << 10 // let the parser name the problem
	}
	buf := bytes.NewBuffer(make([]byte, 0, want+1))
	buf.Write(head)
	if _, err := buf.ReadFrom(io.LimitReader(r, limit-12+1)); err != nil {
		return nil, fmt.Errorf("read screencap pixels: %w", err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("read screencap: output exceeds %d bytes", limit)
	}
	return buf.Bytes(), nil
}
