package fakeadbd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// maxInstall bounds the APK a streamed install reads.
const maxInstall = 256 << 20

// pmInstall answers `pm install [-r] [-d] [-t] [-g] PATH` and the
// streamed `pm install … -S SIZE` (also as `cmd package install …`, which
// the real adb's own `adb install` sends over exec: to a phone with the
// cmd feature, then writes the APK's SIZE bytes to it) like Android 13's
// package manager: it reads the APK (one of capture.SimAPK, whose
// manifest is plain XML) and prints "Success", or "Failure [INSTALL_…:
// …]" with exit status 1: a file that is no APK, an update to a lower
// versionCode without -d. The package is then installed at the APK's
// version: `pm path` finds it and `dumpsys package` reports its
// versionCode (Installs lists them).
func (p *Phone) pmInstall(env *shellEnv, args []string) int {
	out, errw := env.stdout, env.stderr
	downgrade := false
	path, size := "", int64(-1)
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-d":
			downgrade = true
		case a == "-r", a == "-t", a == "-g":
			// -r (replace) is what Android 7 and later always do.
		case a == "-S" && i+1 < len(args):
			n, err := strconv.ParseInt(args[i+1], 10, 64)
			if err != nil || n < 0 || n > maxInstall {
				fmt.Fprintf(errw, "Error: invalid size: %s\n", args[i+1])
				return 1
			}
			size = n
			i++
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(errw, "Error: Unknown option: %s\n", a)
			return 1
		default:
			path = a
		}
	}
	var data []byte
	if size >= 0 {
		var buf bytes.Buffer
		if n, err := io.CopyN(&buf, env.st, size); err != nil {
			fmt.Fprintf(out, "Failure [INSTALL_FAILED_INTERNAL_ERROR: read %d of %d bytes]\n", n, size)
			return 1
		}
		data = buf.Bytes()
	} else {
		p.mu.Lock()
		b, ok := p.files[path]
		p.mu.Unlock()
		if path == "" || !ok {
			fmt.Fprintf(errw, "Error: Can't open file: %s\n", path)
			return 1
		}
		data = b
	}
	v, err := capture.ParseSimAPK(data)
	if err != nil {
		fmt.Fprintf(out, "Failure [%v]\n", err)
		return 1
	}
	if old, err := p.sim.AppVersion(context.Background(), v.Package); err == nil {
		if old.VersionCode > v.VersionCode && !downgrade {
			fmt.Fprintf(out, "Failure [INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected: Update version code %d is older than current %d]\n", v.VersionCode, old.VersionCode)
			return 1
		}
	}
	p.sim.InstallApp(v)
	p.mu.Lock()
	p.installs = append(p.installs, v)
	p.mu.Unlock()
	fmt.Fprintln(out, "Success")
	return 0
}

// Installs returns the packages `pm install` installed, oldest first.
func (p *Phone) Installs() []protocol.AppVersion {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]protocol.AppVersion(nil), p.installs...)
}
