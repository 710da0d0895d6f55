package adb

import (
	"bytes"
	"testing"
)

// The fuzz targets check that no input makes a parser panic, and that what
// a parser accepts is consistent. Seeds live in testdata/fuzz.

func FuzzDecodeScreencap(f *testing.F) {
	f.Add(rawShot(2, 1, FormatRGBA8888, 1, []byte{1, 2, 3, 255, 4, 5, 6, 255}))
	f.Add(rawShot(1, 1, FormatRGB565, -1, []byte{0, 0xf8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, h, err := DecodeScreencap(bytes.Clone(b))
		if err != nil {
			return
		}
		if got := img.Bounds(); got.Dx() != h.Width || got.Dy() != h.Height {
			t.Fatalf("image %v, header %dx%d", got, h.Width, h.Height)
		}
		_ = img.At(h.Width-1, h.Height-1)
	})
}

func FuzzParseDeviceListLong(f *testing.F) {
	f.Add("emulator-5554          device product:sdk model:Pixel_7 device:emu transport_id:4\n")
	f.Add("0123 no permissions (udev); see [http://x] usb:1-1\n")
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := ParseDeviceListLong(s)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.Serial == "" || d.State == "" {
				t.Fatalf("accepted entry %+v", d)
			}
		}
	})
}

func FuzzParseDeviceList(f *testing.F) {
	f.Add("R58M123\tdevice\n127.0.0.1:40001\tunauthorized\n")
	f.Add("0123\tno permissions (udev)\n")
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := ParseDeviceList(s)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.Serial == "" || d.State == "" {
				t.Fatalf("accepted entry %+v", d)
			}
		}
	})
}

func FuzzParseShellOutput(f *testing.F) {
	f.Add(AppendShellPacket(AppendShellPacket(nil, ShellStdout, []byte("hi")), ShellExit, []byte{0}))
	f.Add([]byte{2, 1, 0, 0, 0, 'e', 3, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseShellOutput(bytes.NewReader(b), 1<<16)
		if err == nil && (res.ExitCode < 0 || res.ExitCode > 255) {
			t.Fatalf("exit code %d", res.ExitCode)
		}
		_, _ = ParseShellV1Output(b)
	})
}

func FuzzParseSync(f *testing.F) {
	f.Add([]byte("STAT\xa4\x81\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("DATA\x00\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseStatReply(b)
		_, _, _ = ParseSyncHeader(b)
		if len(b) >= 4 {
			_, _ = ParseHexLength(b[:4])
		}
	})
}
