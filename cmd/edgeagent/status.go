package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
)

// statusCommand shows the running agent's status document, read from its
// local status endpoint.
type statusCommand struct {
	app        *app
	configPath string
	addr       string
	json       bool
}

func (c *statusCommand) name() string { return "status" }
func (c *statusCommand) summary() string {
	return "show what the running agent is doing: connection, jobs, phones, recent stops and errors"
}

func (c *statusCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.configPath, "c", config.DefaultAgentFile, "read the status address (status.listen) from `file`")
	fs.StringVar(&c.addr, "addr", "", "status endpoint `host:port`, instead of the config's status.listen")
	fs.BoolVar(&c.json, "json", false, "print the status document as JSON")
	return fs
}

func (c *statusCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	addr := c.addr
	if addr == "" {
		cfg, err := config.LoadAgent(c.configPath)
		if err != nil {
			return reportLoadError(c.app.stderr, err)
		}
		addr = cfg.Status.Listen
	}
	st, raw, err := fetchStatus(ctx, addr)
	if err != nil {
		fmt.Fprintf(c.app.stderr, "%s: cannot read the agent's status at %s: %v\n(is the agent running? it serves status.listen while it runs)\n", progName, addr, err)
		return &exitError{exitFailure}
	}
	if c.json {
		_, err := c.app.stdout.Write(raw)
		return err
	}
	renderStatus(c.app.stdout, st, time.Now())
	return nil
}

// fetchStatus reads the status document from the endpoint at addr.
func fetchStatus(ctx context.Context, addr string) (protocol.AgentStatus, []byte, error) {
	var st protocol.AgentStatus
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return st, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return st, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, nil, fmt.Errorf("%s", resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, nil, fmt.Errorf("decode status: %w", err)
	}
	return st, raw, nil
}

// renderStatus prints the status document for a person.
func renderStatus(w io.Writer, st protocol.AgentStatus, now time.Time) {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return roundDur(now.Sub(t)).String() + " ago"
	}
	fmt.Fprintf(w, "edgeagent %s  boot %s  version %s  up %s\n", st.AgentID, st.BootID, st.Version, roundDur(now.Sub(st.Started)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	state := st.State
	if st.State == "running" {
		state = fmt.Sprintf("running, %d of %d slots free", st.Free, st.Slots)
	}
	fmt.Fprintf(tw, "state:\t%s\n", state)
	conn := st.Connection
	if conn.NATSConnected {
		fmt.Fprintf(tw, "nats:\tconnected to %s\n", conn.Server)
	} else {
		fmt.Fprintf(tw, "nats:\tNOT CONNECTED (reconnecting to %s)\n", orDash(conn.Server))
	}
	if conn.HelloAccepted {
		fmt.Fprintf(tw, "coordinator:\t%s accepted hello %s; lease ttl %s; clock offset %+dms; last heartbeat %s\n",
			orDash(conn.CoordinatorID), ago(conn.LastHello), time.Duration(conn.LeaseTTLMS)*time.Millisecond, conn.ClockOffsetMS, ago(conn.LastHeartbeat))
	} else {
		fmt.Fprintf(tw, "coordinator:\tno session (last hello %s)\n", ago(conn.LastHello))
	}
	if len(st.Settings) > 0 {
		var kv []string
		for k, v := range st.Settings {
			kv = append(kv, k+"="+v)
		}
		fmt.Fprintf(tw, "settings:\t%s\n", strings.Join(sortStrings(kv), " "))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nJobs (%d)\n", len(st.Jobs))
	if len(st.Jobs) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  JOB\tGEN\tOWNER\tPHONE\tSTEP\tLEASE LEFT\tDOING")
		for _, j := range st.Jobs {
			step := fmt.Sprintf("%d/%d", j.Step, j.Steps)
			if j.Interactive {
				step += "+i"
			}
			lease := roundDur(time.Duration(j.LeaseLeftMS) * time.Millisecond).String()
			if !j.Leased {
				lease += " (unconfirmed)"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\n", j.Token.JobID, j.Token.Generation, j.Token.Owner, orDash(j.Phone), step, lease, orDash(j.Current))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nPhones (%d)\n", len(st.Phones))
	if len(st.Phones) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERIAL\tSTATE\tMODEL\tTAGS\tJOB")
		for _, p := range st.Phones {
			busy := "idle"
			if p.Busy {
				busy = "busy"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Serial, p.State, orDash(p.Model), orDash(strings.Join(p.Tags, ",")), busy)
		}
		tw.Flush()
	}
	if len(st.Stops) > 0 {
		fmt.Fprintf(w, "\nRecent stops\n")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  WHEN\tJOB\tGEN\tCAUSE\tCUT SHORT")
		for _, s := range st.Stops {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", ago(s.At), s.Token.JobID, s.Token.Generation, s.Cause, orDash(s.CutShort))
		}
		tw.Flush()
	}
	if len(st.Errors) > 0 {
		fmt.Fprintf(w, "\nLast errors\n")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  WHEN\tWHAT\tJOB\tERROR")
		for _, e := range st.Errors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ago(e.At), e.What, orDash(e.JobID), e.Error)
		}
		tw.Flush()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func roundDur(d time.Duration) time.Duration {
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

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
