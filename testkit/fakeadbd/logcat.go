package fakeadbd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/capture"
)

// date prints the phone's clock (the PC's): +%s.%N and +%s formats, else
// date's default format.
func (p *Phone) date(out, errw io.Writer, args []string) int {
	now := time.Now()
	if len(args) == 0 {
		fmt.Fprintln(out, now.UTC().Format("Mon Jan _2 15:04:05 MST 2006"))
		return 0
	}
	f, ok := strings.CutPrefix(args[0], "+")
	if !ok {
		fmt.Fprintf(errw, "date: bad date '%s'\n", args[0])
		return 1
	}
	r := strings.NewReplacer("%s", fmt.Sprint(now.Unix()), "%N", fmt.Sprintf("%09d", now.Nanosecond()))
	fmt.Fprintln(out, r.Replace(f))
	return 0
}

// logcat prints the phone's log: the lines of its simulated phone (one per
// operation, as its system services would log them, plus those added with
// Log). -d dumps and exits; without it, logcat follows the log until its
// stream closes. -T <seconds.millis> starts at that time; -v is accepted
// (the format is threadtime).
func (p *Phone) logcat(env *shellEnv, args []string) int {
	dump := false
	since := "0"
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-d":
			dump = true
		case "-v", "-b":
			i++
		case "-T", "-t":
			if i+1 >= len(args) {
				fmt.Fprintf(env.stderr, "logcat: option requires an argument -- %s\n", a[1:])
				return 1
			}
			i++
			since = args[i]
			if !strings.Contains(since, ".") {
				fmt.Fprintf(env.stderr, "logcat: the fake phone takes -T as seconds.millis, got %q\n", since)
				return 1
			}
		default:
			fmt.Fprintf(env.stderr, "logcat: unknown option %s\n", a)
			return 1
		}
	}
	if _, err := capture.ParseLogTime(since); err != nil {
		fmt.Fprintf(env.stderr, "logcat: %v\n", err)
		return 1
	}
	fmt.Fprintln(env.stdout, "--------- beginning of main")
	mark := capture.LogMark{Since: since}
	for {
		if _, err := p.sim.LogSince(context.Background(), mark, env.stdout); err != nil {
			fmt.Fprintf(env.stderr, "logcat: %v\n", err)
			return 1
		}
		if dump {
			return 0
		}
		now := time.Now()
		mark.Since = fmt.Sprintf("%d.%03d", now.Unix(), now.Nanosecond()/1e6)
		if !p.sleep(env.st, 100*time.Millisecond) {
			return 130
		}
	}
}

// Log adds a line to the phone's log, as an app would.
func (p *Phone) Log(tag, msg string) { p.sim.Log(tag, msg) }
