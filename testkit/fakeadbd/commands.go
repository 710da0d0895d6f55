package fakeadbd

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/adb"
)

var pngEnc = png.Encoder{CompressionLevel: png.BestSpeed}

// frame renders the current screen as RGBA, with noise when configured.
func (p *Phone) frame(ctx context.Context) (*image.RGBA, int64, error) {
	img, err := p.sim.ScreenImage(ctx)
	if err != nil {
		return nil, 0, err
	}
	var rgba *image.RGBA
	switch m := img.(type) {
	case *image.RGBA:
		rgba = m
	case *image.Paletted:
		rgba = palettedToRGBA(m)
	default:
		rgba = image.NewRGBA(img.Bounds())
		draw.Draw(rgba, rgba.Rect, img, img.Bounds().Min, draw.Src)
	}
	p.mu.Lock()
	p.shots++
	frameNo := p.shots
	p.mu.Unlock()
	if p.opts.Noise {
		x := uint64(frameNo)*0x9E3779B97F4A7C15 | 1
		px := rgba.Pix
		for i := 0; i+8 <= len(px); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v := binary.LittleEndian.Uint64(px[i:]) ^ (x & 0x00ffffff00ffffff)
			binary.LittleEndian.PutUint64(px[i:], v)
		}
	}
	p.mu.Lock()
	p.lastFrame = rgba
	p.mu.Unlock()
	return rgba, frameNo, nil
}

// LastFrame returns the screen the last screencap captured, as it was
// before encoding.
func (p *Phone) LastFrame() *image.RGBA {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastFrame
}

func (p *Phone) screencap(ctx context.Context, out, errw io.Writer, args []string) int {
	asPNG := false
	for _, a := range args {
		switch a {
		case "-p":
			asPNG = true
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(errw, "screencap: unsupported option %s\n", a)
				return 1
			}
			fmt.Fprintln(errw, "screencap: writing to a file is not supported by the fake phone")
			return 1
		}
	}
	img, _, err := p.frame(ctx)
	if err != nil {
		fmt.Fprintf(errw, "screencap: %v\n", err)
		return 1
	}
	if asPNG {
		var buf bytes.Buffer
		if err := pngEnc.Encode(&buf, img); err != nil {
			fmt.Fprintf(errw, "screencap: %v\n", err)
			return 1
		}
		if _, err := out.Write(buf.Bytes()); err != nil {
			return 1
		}
		return 0
	}
	w, h := img.Rect.Dx(), img.Rect.Dy()
	cs := 1
	if p.opts.LegacyHeader {
		cs = -1
	}
	hdr := adb.EncodeScreencapHeader(w, h, p.opts.ScreencapFormat, cs)
	if p.opts.BrokenRaw {
		_, _ = out.Write(hdr[:7])
		return 0
	}
	var px []byte
	switch p.opts.ScreencapFormat {
	case adb.FormatRGBA8888:
		px = img.Pix
	case adb.FormatRGBX8888:
		px = bytes.Clone(img.Pix)
		for i := 3; i < len(px); i += 4 {
			px[i] = 0x5a // undefined byte
		}
	case adb.FormatRGB565:
		px = make([]byte, w*h*2)
		for i, j := 0, 0; i+3 < len(img.Pix); i, j = i+4, j+2 {
			r, g, b := uint16(img.Pix[i]>>3), uint16(img.Pix[i+1]>>2), uint16(img.Pix[i+2]>>3)
			binary.LittleEndian.PutUint16(px[j:], r<<11|g<<5|b)
		}
	default:
		fmt.Fprintf(errw, "screencap: format %d not supported by the fake phone\n", p.opts.ScreencapFormat)
		return 1
	}
	if _, err := out.Write(hdr); err != nil {
		return 1
	}
	if _, err := out.Write(px); err != nil {
		return 1
	}
	return 0
}

func (p *Phone) uiautomator(ctx context.Context, out, errw io.Writer, args []string) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(errw, "Usage: uiautomator <subcommand> [options]")
		return 1
	}
	path := "/sdcard/window_dump.xml"
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			path = a
		}
	}
	p.mu.Lock()
	p.dumps++
	fail := p.dumps <= p.opts.UIDumpFailures
	p.mu.Unlock()
	if fail {
		fmt.Fprintln(out, "ERROR: could not get idle state.")
		return 0
	}
	xml, err := p.sim.UIDump(ctx)
	if err != nil {
		fmt.Fprintf(errw, "ERROR: %v\n", err)
		return 1
	}
	if path == "/dev/tty" {
		if p.opts.NoTTY {
			fmt.Fprintln(errw, "java.io.FileNotFoundException: /dev/tty: open failed: ENXIO (No such device or address)")
			return 1
		}
		_, _ = out.Write(xml)
	} else {
		p.mu.Lock()
		p.files[path] = xml
		p.mu.Unlock()
	}
	fmt.Fprintf(out, "UI hierchary dumped to: %s\n", path)
	return 0
}

func (p *Phone) input(ctx context.Context, env *shellEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "Usage: input [<source>] <command> [<arg>...]")
		return 1
	}
	p.mu.Lock()
	p.inputs = append(p.inputs, InputEvent{Args: append([]string(nil), args...)})
	p.mu.Unlock()
	if !p.sleep(env.st, p.opts.InputDelay) {
		return 130
	}
	num := func(i int) (int, bool) {
		if i >= len(args) {
			return 0, false
		}
		n, err := strconv.Atoi(args[i])
		return n, err == nil
	}
	bad := func() int {
		fmt.Fprintf(env.stderr, "Error: Invalid arguments for command: %s\n", args[0])
		return 1
	}
	var err error
	switch args[0] {
	case "tap":
		x, ok1 := num(1)
		y, ok2 := num(2)
		if !ok1 || !ok2 || len(args) != 3 {
			return bad()
		}
		err = p.sim.Tap(ctx, x, y)
	case "swipe", "draganddrop":
		x1, ok1 := num(1)
		y1, ok2 := num(2)
		x2, ok3 := num(3)
		y2, ok4 := num(4)
		if !ok1 || !ok2 || !ok3 || !ok4 || len(args) > 6 {
			return bad()
		}
		ms, _ := num(5)
		err = p.sim.Swipe(ctx, x1, y1, x2, y2, time.Duration(ms)*time.Millisecond)
	case "text":
		if len(args) != 2 {
			return bad()
		}
		err = p.sim.Text(ctx, strings.ReplaceAll(args[1], "%s", " "))
	case "keyevent":
		if len(args) < 2 {
			return bad()
		}
		for _, k := range args[1:] {
			if k == "--longpress" {
				continue
			}
			if err = p.sim.Key(ctx, k); err != nil {
				break
			}
		}
	default:
		fmt.Fprintf(env.stderr, "Error: Unknown command: %s\n", args[0])
		return 1
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

func (p *Phone) monkey(ctx context.Context, env *shellEnv, args []string) int {
	pkg := ""
	for i := 0; i < len(args); i++ {
		if args[i] == "-p" && i+1 < len(args) {
			pkg = args[i+1]
		}
	}
	p.mu.Lock()
	p.inputs = append(p.inputs, InputEvent{Args: append([]string{"monkey"}, args...)})
	p.mu.Unlock()
	if !p.sleep(env.st, p.opts.InputDelay) {
		return 130
	}
	if pkg == "" || !p.sim.Installed(pkg) {
		fmt.Fprintln(env.stdout, "  bash arg: -p")
		fmt.Fprintln(env.stdout, "** No activities found to run, monkey aborted.")
		return 251
	}
	if err := p.sim.Launch(ctx, pkg); err != nil {
		fmt.Fprintf(env.stderr, "monkey: %v\n", err)
		return 1
	}
	fmt.Fprintln(env.stdout, "Events injected: 1")
	fmt.Fprintln(env.stdout, "## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)")
	return 0
}

// pm answers the package manager's queries like a phone: `pm path <pkg>`
// prints the package's APK ("package:/data/app/<pkg>/base.apk") or nothing
// with exit status 1 when it is not installed; `pm list packages [filter]`
// prints "package:<name>" for the launcher, each package of
// Options.Packages and each one `pm install` installed whose name
// contains filter.
func (p *Phone) pm(out, errw io.Writer, args []string) int {
	switch {
	case len(args) == 2 && args[0] == "path":
		if !p.sim.Installed(args[1]) {
			return 1
		}
		fmt.Fprintf(out, "package:/data/app/%s/base.apk\n", args[1])
		return 0
	case len(args) == 2 && args[0] == "clear":
		if !p.sim.Installed(args[1]) {
			fmt.Fprintln(out, "Failed")
			return 1
		}
		if err := p.sim.ClearData(context.Background(), args[1]); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
		fmt.Fprintln(out, "Success")
		return 0
	case len(args) >= 2 && args[0] == "list" && args[1] == "packages":
		filter := safeArg(args, 2)
		names := append([]string{capture.SimLauncher}, p.opts.Packages...)
		if p.opts.IME {
			names = append(names, capture.IMEPackage)
		}
		for _, v := range p.Installs() {
			names = append(names, v.Package)
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			if strings.Contains(n, filter) {
				fmt.Fprintf(out, "package:%s\n", n)
			}
		}
		return 0
	}
	fmt.Fprintln(errw, "usage: pm path PACKAGE | pm clear PACKAGE | pm install [-r] [-d] PATH | pm list packages [FILTER]")
	return 1
}

// screenrecord registers a process that runs until SIGINT (file complete,
// exit 0), SIGKILL (file truncated, exit 137) or its time limit.
func (p *Phone) screenrecord(env *shellEnv, pid int, args []string) int {
	limit := 180 * time.Second
	path := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--time-limit":
			if i+1 < len(args) {
				if n, err := strconv.Atoi(args[i+1]); err == nil && n > 0 {
					limit = time.Duration(n) * time.Second
				}
				i++
			}
		case "--bit-rate", "--size", "--bugreport", "--verbose":
			if a == "--bit-rate" || a == "--size" {
				i++
			}
		default:
			path = a
		}
	}
	if path == "" {
		fmt.Fprintln(env.stderr, "Must specify output file (see --help).")
		return 2
	}
	pr := &proc{pid: pid, name: "screenrecord", sig: make(chan string, 1)}
	p.mu.Lock()
	p.procs[pid] = pr
	p.files[path] = nil
	p.mu.Unlock()
	t := time.NewTimer(limit)
	defer t.Stop()
	sig := "INT"
	select {
	case sig = <-pr.sig:
	case <-t.C:
	case <-p.closing:
		sig = "KILL"
	}
	data := fakeMP4(path, p.opts.RecordingSize)
	code := 0
	if sig == "KILL" {
		data = data[:len(data)/3]
		code = 137
	}
	p.mu.Lock()
	delete(p.procs, pid)
	// The file was created when the recording started; one removed
	// meanwhile (rm of a file still open) does not come back.
	if _, ok := p.files[path]; ok && !p.closed {
		p.files[path] = data
	}
	p.mu.Unlock()
	return code
}

// fakeMP4 returns an ISO BMFF file of size bytes: ftyp, then mdat filled
// with noise derived from the path.
func fakeMP4(path string, size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, 0, 0, 0, 24)
	b = append(b, "ftypmp42\x00\x00\x00\x00isommp42"...)
	b = binary.BigEndian.AppendUint32(b, uint32(size-len(b)))
	b = append(b, "mdat"...)
	x := uint64(len(path))*0x9E3779B97F4A7C15 | 1
	for _, c := range path {
		x = x*31 + uint64(c)
	}
	for len(b) < size {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b = append(b, byte(x))
	}
	return b[:size]
}

func (p *Phone) kill(errw io.Writer, args []string) int {
	sig := "TERM"
	status := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			sig = normSignal(strings.TrimPrefix(a, "-"))
			continue
		}
		pid, err := strconv.Atoi(a)
		p.mu.Lock()
		pr := p.procs[pid]
		if pr != nil {
			p.signals = append(p.signals, sig+" "+pr.name)
		}
		p.mu.Unlock()
		if err != nil || pr == nil {
			fmt.Fprintf(errw, "kill: %s: No such process\n", a)
			status = 1
			continue
		}
		pr.signal(sig)
	}
	return status
}

func (p *Phone) pkill(args []string) int {
	sig := "TERM"
	status := 1
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			sig = normSignal(strings.TrimPrefix(a, "-"))
			continue
		}
		p.mu.Lock()
		var hit []*proc
		for _, pr := range p.procs {
			if pr.name == a {
				hit = append(hit, pr)
				p.signals = append(p.signals, sig+" "+pr.name)
			}
		}
		p.mu.Unlock()
		for _, pr := range hit {
			pr.signal(sig)
			status = 0
		}
	}
	return status
}

func normSignal(s string) string {
	switch strings.TrimPrefix(strings.ToUpper(s), "SIG") {
	case "2", "INT":
		return "INT"
	case "9", "KILL":
		return "KILL"
	case "15", "TERM":
		return "TERM"
	}
	return strings.ToUpper(s)
}

func (p *Phone) rm(errw io.Writer, args []string) int {
	force := false
	status := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			force = force || strings.Contains(a, "f")
			continue
		}
		p.mu.Lock()
		_, ok := p.files[a]
		delete(p.files, a)
		p.mu.Unlock()
		if !ok && !force {
			fmt.Fprintf(errw, "rm: %s: No such file or directory\n", a)
			status = 1
		}
	}
	return status
}

// serveSync serves the sync: service: STAT, STA2, RECV, SEND and QUIT.
func (p *Phone) serveSync(st *stream) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(st, h[:]); err != nil {
			return
		}
		id := string(h[:4])
		n := binary.LittleEndian.Uint32(h[4:])
		if id == "QUIT" {
			return
		}
		if n > 1024 {
			syncFail(st, "path too long")
			return
		}
		arg := make([]byte, n)
		if _, err := io.ReadFull(st, arg); err != nil {
			return
		}
		path := string(arg)
		switch id {
		case "STAT":
			b := []byte("STAT")
			p.mu.Lock()
			data, ok := p.files[path]
			p.mu.Unlock()
			if ok {
				b = binary.LittleEndian.AppendUint32(b, 0o100660)
				b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
				b = binary.LittleEndian.AppendUint32(b, uint32(time.Now().Unix()))
			} else {
				b = append(b, make([]byte, 12)...)
			}
			if _, err := st.Write(b); err != nil {
				return
			}
		case "STA2", "LST2":
			b := []byte(id)
			p.mu.Lock()
			data, ok := p.files[path]
			p.mu.Unlock()
			if !ok {
				b = binary.LittleEndian.AppendUint32(b, 2) // ENOENT
				b = append(b, make([]byte, 64)...)
			} else {
				b = binary.LittleEndian.AppendUint32(b, 0)
				b = binary.LittleEndian.AppendUint64(b, 1)                 // dev
				b = binary.LittleEndian.AppendUint64(b, 1)                 // ino
				b = binary.LittleEndian.AppendUint32(b, 0o100660)          // mode
				b = binary.LittleEndian.AppendUint32(b, 1)                 // nlink
				b = binary.LittleEndian.AppendUint32(b, 1023)              // uid
				b = binary.LittleEndian.AppendUint32(b, 1023)              // gid
				b = binary.LittleEndian.AppendUint64(b, uint64(len(data))) // size
				now := uint64(time.Now().Unix())
				b = binary.LittleEndian.AppendUint64(b, now)
				b = binary.LittleEndian.AppendUint64(b, now)
				b = binary.LittleEndian.AppendUint64(b, now)
			}
			if _, err := st.Write(b); err != nil {
				return
			}
		case "RECV":
			p.mu.Lock()
			data, ok := p.files[path]
			p.mu.Unlock()
			if !ok {
				syncFail(st, "open failed: No such file or directory")
				continue
			}
			for len(data) > 0 {
				chunk := data[:min(len(data), adb.SyncDataMax)]
				b := append([]byte("DATA"), binary.LittleEndian.AppendUint32(nil, uint32(len(chunk)))...)
				if _, err := st.Write(append(b, chunk...)); err != nil {
					return
				}
				data = data[len(chunk):]
			}
			if _, err := st.Write([]byte("DONE\x00\x00\x00\x00")); err != nil {
				return
			}
		case "SEND":
			name, _, _ := strings.Cut(path, ",")
			var buf bytes.Buffer
			for {
				var ch [8]byte
				if _, err := io.ReadFull(st, ch[:]); err != nil {
					return
				}
				cid, cn := string(ch[:4]), binary.LittleEndian.Uint32(ch[4:])
				if cid == "DONE" {
					break
				}
				if cid != "DATA" || cn > adb.SyncDataMax {
					syncFail(st, "invalid data message")
					return
				}
				if _, err := io.CopyN(&buf, st, int64(cn)); err != nil {
					return
				}
			}
			p.mu.Lock()
			p.files[name] = buf.Bytes()
			p.mu.Unlock()
			if _, err := st.Write([]byte("OKAY\x00\x00\x00\x00")); err != nil {
				return
			}
		case "LIST":
			if _, err := st.Write([]byte("DONE\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")); err != nil {
				return
			}
		default:
			syncFail(st, "unknown sync request "+strconv.Quote(id))
			return
		}
	}
}

func syncFail(st *stream, msg string) {
	b := append([]byte("FAIL"), binary.LittleEndian.AppendUint32(nil, uint32(len(msg)))...)
	_, _ = st.Write(append(b, msg...))
}

// palettedToRGBA converts through a lookup table, much faster than draw.
func palettedToRGBA(m *image.Paletted) *image.RGBA {
	var lut [256][4]byte
	for i, c := range m.Palette {
		r, g, b, a := c.RGBA()
		lut[i] = [4]byte{byte(r >> 8), byte(g >> 8), byte(b >> 8), byte(a >> 8)}
	}
	r := m.Rect
	out := image.NewRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	for y := 0; y < r.Dy(); y++ {
		src := m.Pix[y*m.Stride : y*m.Stride+r.Dx()]
		dst := out.Pix[y*out.Stride : y*out.Stride+4*r.Dx()]
		for x, v := range src {
			copy(dst[4*x:4*x+4], lut[v][:])
		}
	}
	return out
}
