package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/internal/agentstatus"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// statusCommand shows the running agent's status document, read from its
// local status endpoint.
func (a *app) statusCommand() *cli.Command {
	var path, addr string
	return &cli.Command{
		Name:     "status",
		Summary:  "show what the running agent is doing: connection, jobs, phones, recent stops and errors",
		JSON:     true,
		JSONHelp: "print the status document as JSON",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&path, "c", config.DefaultAgentFile, "read the status address (status.listen) from `file`")
			fs.StringVar(&addr, "addr", "", "status endpoint `host:port`, instead of the config's status.listen")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if addr == "" {
				cfg, err := config.LoadAgent(path)
				if err != nil {
					return cli.ConfigError(c.Stderr, err)
				}
				addr = cfg.Status.Listen
			}
			st, raw, err := fetchStatus(ctx, addr)
			if err != nil {
				return c.Failf("cannot read the agent's status at %s: %v\n(is the agent running? it serves status.listen while it runs)", addr, err)
			}
			if c.JSON {
				_, err := c.Stdout.Write(raw)
				return err
			}
			agentstatus.Render(c.Stdout, st, a.now())
			return nil
		},
	}
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

// orDash and roundDur are the status display's helpers for doctor.
func orDash(s string) string                 { return agentstatus.Dash(s) }
func roundDur(d time.Duration) time.Duration { return agentstatus.RoundDuration(d) }
