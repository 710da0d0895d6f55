package fakeadbd

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// latinIME is the input method a phone starts with.
const latinIME = "com.android.inputmethod.latin/.LatinIME"

// IMETexts returns the texts ADB_INPUT_B64 broadcasts typed, decoded, in
// order: what reached the focused field through the input method.
func (p *Phone) IMETexts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.imeTexts)
}

// CurrentIME returns the current input method, as `settings get secure
// default_input_method` prints it.
func (p *Phone) CurrentIME() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.imeCurrent
}

// Setting returns a value set with `settings put` (namespace "system",
// "secure" or "global"), and whether it is set.
func (p *Phone) Setting(namespace, key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.settings[namespace+" "+key]
	return v, ok
}

// am answers the activity manager commands an agent sends: `start -a
// android.intent.action.VIEW -d <url>` (the simulated phone opens the URL;
// one without a scheme cannot be resolved), `force-stop <pkg>`, and
// `broadcast -a ADB_INPUT_B64 --es msg <base64>`, which types the decoded
// text when ADBKeyboard is the current input method and reaches no
// receiver otherwise. Other am commands print a started intent.
func (p *Phone) am(ctx context.Context, out, errw io.Writer, args []string) int {
	sub := safeArg(args, 0)
	opt := func(name string) string {
		for i := 1; i+1 < len(args); i++ {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	switch sub {
	case "start":
		action, data := opt("-a"), opt("-d")
		if action != "android.intent.action.VIEW" || data == "" {
			fmt.Fprintln(out, "Starting: Intent { }")
			return 0
		}
		fmt.Fprintf(out, "Starting: Intent { act=%s dat=%s }\n", action, data)
		if !strings.Contains(data, ":") {
			fmt.Fprintln(errw, "Error: Activity not started, unable to resolve Intent { act=android.intent.action.VIEW dat="+data+" flg=0x10000000 }")
			return 0
		}
		if err := p.sim.OpenURL(ctx, data); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
		return 0
	case "force-stop":
		if len(args) != 2 {
			fmt.Fprintln(errw, "Error: force-stop needs a package")
			return 1
		}
		if err := p.sim.ForceStop(ctx, args[1]); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
		return 0
	case "broadcast":
		action := opt("-a")
		fmt.Fprintf(out, "Broadcasting: Intent { act=%s flg=0x400000 }\n", action)
		if action == "ADB_INPUT_B64" {
			p.mu.Lock()
			active := p.imeCurrent == capture.IMEID && p.opts.IME
			p.mu.Unlock()
			if active {
				b, err := base64.StdEncoding.DecodeString(p.extra(args, "msg"))
				if err != nil {
					fmt.Fprintln(errw, "ADBKeyboard: bad base64")
				} else {
					text := string(b)
					p.mu.Lock()
					p.imeTexts = append(p.imeTexts, text)
					p.mu.Unlock()
					if err := p.sim.Text(ctx, text); err != nil {
						fmt.Fprintf(errw, "ADBKeyboard: %v\n", err)
					}
				}
			}
		}
		fmt.Fprintln(out, "Broadcast completed: result=0")
		return 0
	}
	fmt.Fprintln(out, "Starting: Intent { }")
	return 0
}

// extra returns the value of the string extra `--es name value`.
func (p *Phone) extra(args []string, name string) string {
	for i := 0; i+2 < len(args); i++ {
		if args[i] == "--es" && args[i+1] == name {
			return args[i+2]
		}
	}
	return ""
}

// wm answers `wm dismiss-keyguard` (the simulated phone wakes and unlocks)
// `wm size` and `wm density`.
func (p *Phone) wm(ctx context.Context, out, errw io.Writer, args []string) int {
	switch safeArg(args, 0) {
	case "dismiss-keyguard":
		if err := p.sim.Unlock(ctx); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
		return 0
	case "size":
		w, h := p.opts.Width, p.opts.Height
		if w <= 0 {
			w = 720
		}
		if h <= 0 {
			h = 1280
		}
		fmt.Fprintf(out, "Physical size: %dx%d\n", w, h)
		return 0
	case "density":
		fmt.Fprintf(out, "Physical density: %s\n", p.props()["ro.sf.lcd_density"])
		return 0
	}
	fmt.Fprintln(errw, "usage: wm dismiss-keyguard | wm size | wm density")
	return 1
}

// ime answers `ime list -s` (the enabled input methods), `ime enable ID`
// and `ime set ID`; ADBKeyboard exists only with Options.IME.
func (p *Phone) ime(out, errw io.Writer, args []string) int {
	exists := func(id string) bool { return id == latinIME || id == capture.IMEID && p.opts.IME }
	p.mu.Lock()
	defer p.mu.Unlock()
	switch safeArg(args, 0) {
	case "list":
		ids := make([]string, 0, len(p.imeEnabled))
		for id := range p.imeEnabled {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintln(out, id)
		}
		return 0
	case "enable", "set":
		id := safeArg(args, 1)
		if !exists(id) {
			fmt.Fprintf(errw, "Unknown input method %s cannot be enabled for user #0\n", id)
			return 255
		}
		if args[0] == "enable" {
			p.imeEnabled[id] = true
			fmt.Fprintf(out, "Input method %s: now enabled for user #0\n", id)
			return 0
		}
		if !p.imeEnabled[id] {
			fmt.Fprintf(errw, "Input method %s is not enabled\n", id)
			return 255
		}
		p.imeCurrent = id
		p.settings["secure default_input_method"] = id
		fmt.Fprintf(out, "Input method %s selected for user #0\n", id)
		return 0
	}
	fmt.Fprintln(errw, "usage: ime list -s | ime enable ID | ime set ID")
	return 1
}

// settingsCmd answers `settings get|put <namespace> <key> [value]`;
// system user_rotation and accelerometer_rotation turn the simulated
// phone's orientation.
func (p *Phone) settingsCmd(ctx context.Context, out, errw io.Writer, args []string) int {
	if len(args) < 3 || (args[0] != "get" && args[0] != "put") || (args[0] == "put" && len(args) != 4) {
		fmt.Fprintln(errw, "usage: settings get NAMESPACE KEY | settings put NAMESPACE KEY VALUE")
		return 1
	}
	key := args[1] + " " + args[2]
	p.mu.Lock()
	if args[0] == "get" {
		v, ok := p.settings[key]
		if key == "secure default_input_method" {
			v, ok = p.imeCurrent, true
		}
		p.mu.Unlock()
		if !ok {
			v = "null"
		}
		fmt.Fprintln(out, v)
		return 0
	}
	p.settings[key] = args[3]
	auto := p.settings["system accelerometer_rotation"] == "1"
	rot, _ := strconv.Atoi(p.settings["system user_rotation"])
	p.mu.Unlock()
	if args[1] == "system" && (args[2] == "user_rotation" || args[2] == "accelerometer_rotation") {
		o := protocol.OrientationAuto
		if !auto && rot >= 0 && rot < 4 {
			o = protocol.Orientations[rot]
		}
		if err := p.sim.Rotate(ctx, o); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
	}
	return 0
}
