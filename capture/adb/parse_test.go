package adb

import (
	"bytes"
	"encoding/binary"
	"image"
	"strings"
	"testing"
)

func TestParseDeviceList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []DeviceEntry
		wantErr string
	}{
		{name: "empty", in: ""},
		{name: "states", in: "R58M123\tdevice\n127.0.0.1:40001\tunauthorized\nemulator-5554\toffline\n",
			want: []DeviceEntry{{"R58M123", "device", "", ""}, {"127.0.0.1:40001", "unauthorized", "", ""}, {"emulator-5554", "offline", "", ""}}},
		{name: "no permissions", in: "0123\tno permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html]\n",
			want: []DeviceEntry{{"0123", "no permissions", "(user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html]", ""}}},
		{name: "crlf", in: "a\tdevice\r\n", want: []DeviceEntry{{"a", "device", "", ""}}},
		{name: "no tab", in: "R58M123 device\n", wantErr: `line 1 "R58M123 device": no tab between serial and state`},
		{name: "empty serial", in: "\tdevice\n", wantErr: "empty serial"},
		{name: "empty state", in: "a\t\n", wantErr: "empty state"},
		{name: "duplicate", in: "a\tdevice\na\toffline\n", wantErr: `line 2: serial "a" listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDeviceList(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseDeviceListLong(t *testing.T) {
	in := "R58M123ABC             unauthorized usb:1-1 transport_id:3\n" +
		"emulator-5554          device product:sdk_gphone64 model:Pixel_7 device:emu64 transport_id:4\n" +
		"0123                   no permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html] usb:1-2 transport_id:5\n" +
		"127.0.0.1:40001 offline\r\n\n"
	got, err := ParseDeviceListLong(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []DeviceEntry{
		{"R58M123ABC", "unauthorized", "", ""},
		{"emulator-5554", "device", "", "Pixel_7"},
		{"0123", "no permissions", "(user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html]", ""},
		{"127.0.0.1:40001", "offline", "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for in, wantErr := range map[string]string{
		"R58M123\n":                     `line 1 "R58M123": no state after the serial`,
		"a device\na offline usb:1-1\n": `line 2: serial "a" listed twice`,
	} {
		if _, err := ParseDeviceListLong(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseDeviceListLong(%q) = %v, want %q", in, err, wantErr)
		}
	}
}

func TestParseHexLength(t *testing.T) {
	for in, want := range map[string]int{"0000": 0, "001a": 26, "FFFF": 65535, "00aB": 171} {
		if n, err := ParseHexLength([]byte(in)); err != nil || n != want {
			t.Errorf("ParseHexLength(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"00g0", "-001", "12", "12345"} {
		if _, err := ParseHexLength([]byte(in)); err == nil {
			t.Errorf("ParseHexLength(%q) accepted", in)
		}
	}
}

func rawShot(w, h, format, cs int, px []byte) []byte {
	return append(EncodeScreencapHeader(w, h, format, cs), px...)
}

func TestDecodeScreencap(t *testing.T) {
	rgba := []byte{1, 2, 3, 255, 4, 5, 6, 255}
	for _, tc := range []struct {
		name     string
		in       []byte
		hdr      int
		want     [][4]uint8 // pixels in order
		wantErr  string
		wantSize image.Point
	}{
		{name: "RGBA 16-byte header", in: rawShot(2, 1, FormatRGBA8888, 1, bytes.Clone(rgba)), hdr: 16, want: [][4]uint8{{1, 2, 3, 255}, {4, 5, 6, 255}}},
		{name: "RGBA 12-byte header", in: rawShot(1, 2, FormatRGBA8888, -1, bytes.Clone(rgba)), hdr: 12, want: [][4]uint8{{1, 2, 3, 255}, {4, 5, 6, 255}}},
		{name: "RGBX", in: rawShot(2, 1, FormatRGBX8888, 1, []byte{1, 2, 3, 0, 4, 5, 6, 9}), hdr: 16, want: [][4]uint8{{1, 2, 3, 255}, {4, 5, 6, 255}}},
		{name: "BGRA", in: rawShot(1, 1, FormatBGRA8888, 0, []byte{3, 2, 1, 255}), hdr: 16, want: [][4]uint8{{1, 2, 3, 255}}},
		{name: "RGB888", in: rawShot(1, 1, FormatRGB888, -1, []byte{7, 8, 9}), hdr: 12, want: [][4]uint8{{7, 8, 9, 255}}},
		{name: "RGB565", in: rawShot(2, 1, FormatRGB565, 1, binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, 0xF800), 0x07E0)), hdr: 16,
			want: [][4]uint8{{255, 0, 0, 255}, {0, 255, 0, 255}}},
		{name: "short", in: []byte{1, 2, 3}, wantErr: "output is 3 bytes, shorter than the 12-byte header"},
		{name: "zero size", in: rawShot(0, 10, 1, 1, nil), wantErr: "implausible size 0x10"},
		{name: "huge", in: rawShot(1<<20, 1<<20, 1, 1, nil), wantErr: "implausible size"},
		{name: "format", in: rawShot(1, 1, 7, 1, []byte{0, 0, 0, 0}), wantErr: "unsupported pixel format 7"},
		{name: "truncated pixels", in: rawShot(2, 2, 1, 1, rgba), wantErr: "2x2 format 1 needs 16 pixel bytes after a 12- or 16-byte header, output has 24 bytes in all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, h, err := DecodeScreencap(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.HeaderSize != tc.hdr {
				t.Errorf("header size %d, want %d", h.HeaderSize, tc.hdr)
			}
			i := 0
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					r, g, bl, a := img.At(x, y).RGBA()
					got := [4]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}
					if got != tc.want[i] {
						t.Errorf("pixel %d = %v, want %v", i, got, tc.want[i])
					}
					i++
				}
			}
		})
	}
}

func TestParseShellOutput(t *testing.T) {
	var b []byte
	b = AppendShellPacket(b, ShellStdout, []byte("out1 "))
	b = AppendShellPacket(b, ShellStderr, []byte("err"))
	b = AppendShellPacket(b, ShellStdout, []byte("out2"))
	b = AppendShellPacket(b, ShellExit, []byte{3})
	res, err := ParseShellOutput(bytes.NewReader(b), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out1 out2" || string(res.Stderr) != "err" || res.ExitCode != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, tc := range []struct {
		name, wantErr string
		in            []byte
	}{
		{"no exit", "ended without an exit status", AppendShellPacket(nil, ShellStdout, []byte("x"))},
		{"truncated header", "truncated after", []byte{1, 0, 0}},
		{"truncated payload", "3-byte payload truncated", []byte{1, 3, 0, 0, 0, 'a'}},
		{"bad id", "unknown packet id 9", []byte{9, 0, 0, 0, 0}},
		{"exit size", "exit packet has 2 bytes", AppendShellPacket(nil, ShellExit, []byte{0, 0})},
		{"huge", "announces 4294967295 bytes", []byte{1, 0xff, 0xff, 0xff, 0xff}},
		{"limit", "stdout exceeds 4 bytes", AppendShellPacket(nil, ShellStdout, []byte("12345"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseShellOutput(bytes.NewReader(tc.in), 4)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseShellV1Output(t *testing.T) {
	for _, tc := range []struct {
		in   string
		out  string
		code int
		err  string
	}{
		{in: "hello\n\n\037edgeagent-exit=0\n", out: "hello\n"},
		{in: "no newline\n\037edgeagent-exit=1\n", out: "no newline", code: 1},
		{in: "pty\r\n\r\n\037edgeagent-exit=127\r\n", out: "pty\r\n", code: 127},
		{in: "cut off", err: "ended without an exit status"},
		{in: "\n\037edgeagent-exit=x\n", err: `parse exit status "x"`},
		{in: "\n\037edgeagent-exit=300\n", err: `parse exit status "300"`},
	} {
		res, err := ParseShellV1Output([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || string(res.Stdout) != tc.out || res.ExitCode != tc.code {
			t.Errorf("%q: %q %d %v; want %q %d", tc.in, res.Stdout, res.ExitCode, err, tc.out, tc.code)
		}
	}
}

func TestParseSyncReplies(t *testing.T) {
	st := append([]byte("STAT"), 0xa4, 0x81, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0)
	fi, err := ParseStatReply(st)
	if err != nil || fi.Mode != 0o100644 || fi.Size != 10 || !fi.Exists() || !fi.MTime.IsZero() {
		t.Fatalf("stat = %+v, %v", fi, err)
	}
	if _, err := ParseStatReply(append([]byte("FAIL"), make([]byte, 12)...)); err == nil || !strings.Contains(err.Error(), `id "FAIL", want STAT`) {
		t.Errorf("stat FAIL: %v", err)
	}
	if _, err := ParseStatReply([]byte("STAT")); err == nil || !strings.Contains(err.Error(), "4 bytes, want 16") {
		t.Errorf("short stat: %v", err)
	}
	id, n, err := ParseSyncHeader([]byte("DATA\x00\x00\x01\x00"))
	if err != nil || id != "DATA" || n != 65536 {
		t.Errorf("header = %q %d %v", id, n, err)
	}
	if _, _, err := ParseSyncHeader([]byte("da\x00A\x00\x00\x00\x00")); err == nil || !strings.Contains(err.Error(), "not four capital letters") {
		t.Errorf("bad id: %v", err)
	}
}
