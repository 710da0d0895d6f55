// Package agentstatus renders an agent's status document
// (protocol.AgentStatus) for a person: `edgeagent status` reads it from the
// agent's local endpoint, `edgecoord agent status` asks the agent for it
// over NATS, and both print it with Render.
package agentstatus

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// Render prints st as seen at now: ages and uptime are measured from now.
func Render(w io.Writer, st protocol.AgentStatus, now time.Time) {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return RoundDuration(now.Sub(t)).String() + " ago"
	}
	fmt.Fprintf(w, "edgeagent %s  boot %s  version %s  up %s\n", st.AgentID, st.BootID, st.Version, RoundDuration(now.Sub(st.Started)))
	tw := cli.NewTable(w)
	state := st.State
	if st.State == "running" {
		state = fmt.Sprintf("running, %d of %d slots free", st.Free, st.Slots)
	}
	fmt.Fprintf(tw, "state:\t%s\n", state)
	conn := st.Connection
	if conn.NATSConnected {
		fmt.Fprintf(tw, "nats:\tconnected to %s\n", conn.Server)
	} else {
		fmt.Fprintf(tw, "nats:\tNOT CONNECTED (reconnecting to %s)\n", Dash(conn.Server))
	}
	if conn.HelloAccepted {
		fmt.Fprintf(tw, "coordinator:\t%s accepted hello %s; lease ttl %s; clock offset %+dms; last heartbeat %s\n",
			Dash(conn.CoordinatorID), ago(conn.LastHello), time.Duration(conn.LeaseTTLMS)*time.Millisecond, conn.ClockOffsetMS, ago(conn.LastHeartbeat))
	} else {
		fmt.Fprintf(tw, "coordinator:\tno session (last hello %s)\n", ago(conn.LastHello))
	}
	if len(st.Settings) > 0 {
		var kv []string
		for k, v := range st.Settings {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		fmt.Fprintf(tw, "settings:\t%s\n", strings.Join(kv, " "))
	}
	if u := st.Update; u != nil {
		line := u.State
		if u.Target != "" {
			line += " " + u.Target
		}
		if u.AtUnixMilli > 0 {
			line += " " + ago(time.UnixMilli(u.AtUnixMilli))
		}
		if u.Outcome != "" {
			line += ": " + u.Outcome
		}
		fmt.Fprintf(tw, "update:\t%s\n", printable(line))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nJobs (%d)\n", len(st.Jobs))
	if len(st.Jobs) > 0 {
		tw = cli.NewTable(w)
		fmt.Fprintln(tw, "  JOB\tGEN\tOWNER\tPHONE\tSTEP\tLEASE LEFT\tDOING")
		for _, j := range st.Jobs {
			step := fmt.Sprintf("%d/%d", j.Step, j.Steps)
			if j.Interactive {
				step += "+i"
			}
			lease := RoundDuration(time.Duration(j.LeaseLeftMS) * time.Millisecond).String()
			if !j.Leased {
				lease += " (unconfirmed)"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\n", j.Token.JobID, j.Token.Generation, j.Token.Owner, Dash(j.Phone), step, lease, Dash(j.Current))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nPhones (%d)\n", len(st.Phones))
	if len(st.Phones) > 0 {
		tw = cli.NewTable(w)
		fmt.Fprintln(tw, "  SERIAL\tSTATE\tMODEL\tTAGS\tJOB")
		for _, p := range st.Phones {
			busy := "idle"
			if p.Busy {
				busy = "busy"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Serial, p.State, Dash(p.Model), Dash(strings.Join(p.Tags, ",")), busy)
		}
		tw.Flush()
		renderPhoneNotes(w, st.Phones)
	}
	if len(st.Stops) > 0 {
		fmt.Fprintf(w, "\nRecent stops\n")
		tw = cli.NewTable(w)
		fmt.Fprintln(tw, "  WHEN\tJOB\tGEN\tCAUSE\tCUT SHORT")
		for _, s := range st.Stops {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", ago(s.At), s.Token.JobID, s.Token.Generation, s.Cause, Dash(s.CutShort))
		}
		tw.Flush()
	}
	if len(st.Errors) > 0 {
		fmt.Fprintf(w, "\nLast errors\n")
		tw = cli.NewTable(w)
		fmt.Fprintln(tw, "  WHEN\tWHAT\tJOB\tERROR")
		for _, e := range st.Errors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ago(e.At), e.What, Dash(e.JobID), e.Error)
		}
		tw.Flush()
	}
}

// Dash returns s, or "-" for an empty s.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// RoundDuration rounds d for display: milliseconds below a second, tenths
// below a minute, seconds above; a negative d is 0.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Second)
	}
}

// printable replaces the control characters of s, which comes from the
// agent, with spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
