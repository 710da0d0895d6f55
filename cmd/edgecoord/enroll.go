package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/natsauth"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/enroll"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
)

// enrollCommands are "nats init", "agent enroll" and "agent revoke": the
// agents' own NATS identities (docs/operations.md, "Add a PC" and "Retire
// a PC").
func (m *mgmt) enrollCommands() []*cli.Command {
	return []*cli.Command{natsInitCommand(), m.agentEnrollCommand(), m.agentRevokeCommand()}
}

func natsInitCommand() *cli.Command {
	var dir string
	return &cli.Command{
		Name:    "nats init",
		Summary: "make the NATS operator, accounts and keys agents are enrolled with, and the server config include",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dir, "dir", "", "the new, empty `directory` to write the keys, JWTs and server.conf to (required)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if dir == "" {
				return c.Usagef("--dir is required")
			}
			if err := natsauth.Init(dir); err != nil {
				return c.Failf("%v", err)
			}
			_, err := fmt.Fprintf(c.Stdout, `wrote %[1]s (every file mode 0600; keep it secret)
next:
  1. nats-server.conf: include %[2]s (its path relative to nats-server.conf), then restart nats-server
  2. the coordinator config: nats.creds_file: %[3]s and enrollment.nats_dir: %[1]s
  3. per PC: edgecoord agent enroll NAME
`, dir, natsauth.ServerConf, dir+"/"+natsauth.CoordinatorCredsFile)
			return err
		},
	}
}

// enrollStore opens the store with its enrollment tables.
func (m *mgmt) enrollStore(ctx context.Context, c *cli.Call) (jobstore.Store, jobstore.EnrollStore, error) {
	store, err := m.open(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	es, ok := store.(jobstore.EnrollStore)
	if !ok {
		store.Close()
		return nil, nil, fmt.Errorf("the store %T keeps no enrollments", store)
	}
	return store, es, nil
}

func (m *mgmt) agentEnrollCommand() *cli.Command {
	var expires time.Duration
	return &cli.Command{
		Name:      "agent enroll",
		Summary:   "make a one-time code that enrolls the agent NAME (edgeagent enroll on its PC); printed alone on standard output",
		Args:      "NAME",
		CheckArgs: cli.ExactArgs(1, "NAME"),
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.DurationVar(&expires, "expires", 0, "how long the code stays good, at most 720h (default enrollment.code_expiry, 24h)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			name := c.Args[0]
			if err := protocol.ValidateAgentID(name); err != nil {
				return c.Usagef("NAME: %v", err)
			}
			if expires < 0 || expires > config.MaxCodeExpiry.Duration() {
				return c.Usagef("--expires: must be positive and at most %s, got %s", config.MaxCodeExpiry, expires)
			}
			if err := m.load(c); err != nil {
				return err
			}
			if !m.cfg.Enrollment.Enabled() {
				return c.Usagef("enrollment.nats_dir is not set in %s: run edgecoord nats init first (docs/operations.md, \"Add a PC\")", m.configPath)
			}
			if expires == 0 {
				expires = m.cfg.Enrollment.CodeExpiry.Duration()
			}
			store, es, err := m.enrollStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			code, err := enroll.NewCode()
			if err != nil {
				return err
			}
			norm, err := enroll.Parse(code)
			if err != nil {
				return err
			}
			e, err := es.CreateEnrollment(ctx, name, enroll.Hash(norm), expires)
			if errors.Is(err, jobstore.ErrAgentRevoked) {
				return c.Failf("agent %s was revoked: enroll the PC under a new name", name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.Stderr, "enrollment code for agent %s, good once until %s; on the PC run:\n  edgeagent enroll --coordinator URL CODE -c CONFIG\n",
				name, e.ExpiresAt.Format(time.RFC3339))
			_, err = fmt.Fprintln(c.Stdout, code)
			return err
		},
	}
}

func (m *mgmt) agentRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:      "agent revoke",
		Summary:   "retire the agent NAME: its NATS user is cut off and refused, its running jobs are retried elsewhere",
		Args:      "NAME",
		CheckArgs: cli.ExactArgs(1, "NAME"),
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			name := c.Args[0]
			if err := protocol.ValidateAgentID(name); err != nil {
				return c.Usagef("NAME: %v", err)
			}
			store, es, err := m.enrollStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			// The store first: every coordinator refuses the agent and its
			// jobs go back to the queue; a failed push below is mended by
			// running the command again.
			toks, err := es.RevokeAgent(ctx, name)
			if err != nil {
				return err
			}
			for _, tok := range toks {
				if err := m.revoke(tok, "agent revoked"); err != nil {
					c.Warnf("revoke of job %s not sent (%v); its lease is gone all the same", tok.JobID, err)
					break
				}
			}
			if m.cfg.Enrollment.Enabled() {
				if err := m.pushRevocations(ctx, es); err != nil {
					return c.Failf("agent %s revoked in the store, but the NATS server was not told: %v\nrun the command again", name, err)
				}
			} else {
				c.Warnf("enrollment.nats_dir is not set: remove the agent's user from the NATS server's config yourself")
			}
			_, err = fmt.Fprintf(c.Stdout, "agent %s revoked: %d running jobs taken back for a retry\n", name, len(toks))
			return err
		},
	}
}

// pushRevocations re-signs the agents' account with every revoked key
// and pushes it to the NATS server over the system account.
func (m *mgmt) pushRevocations(ctx context.Context, es jobstore.EnrollStore) error {
	is, err := natsauth.Load(m.cfg.Enrollment.NATSDir)
	if err != nil {
		return err
	}
	keys, err := es.RevokedKeys(ctx)
	if err != nil {
		return err
	}
	accJWT, err := is.AccountJWT(keys)
	if err != nil {
		return err
	}
	sysCfg := config.NATS{URL: m.cfg.NATS.URL, CredsFile: is.SystemCreds(), TLS: m.cfg.NATS.TLS,
		ReconnectWait: m.cfg.NATS.ReconnectWait, RequestTimeout: m.cfg.NATS.RequestTimeout}
	nc, err := natsconn.Connect(sysCfg, natsconn.Options{Name: "edgecoord agent revoke", Log: zerolog.Nop(), Extra: []nats.Option{nats.RetryOnFailedConnect(false)}})
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.NATS.RequestTimeout.Duration())
	defer cancel()
	return natsauth.Push(ctx, nc, accJWT)
}

// enrollOptions are the API's enrollment route for the config, nil when
// enrollment is not configured.
func enrollOptions(cfg *config.Coordinator) (*api.EnrollOptions, error) {
	if !cfg.Enrollment.Enabled() {
		return nil, nil
	}
	is, err := natsauth.Load(cfg.Enrollment.NATSDir)
	if err != nil {
		return nil, fmt.Errorf("enrollment.nats_dir: %w", err)
	}
	return &api.EnrollOptions{Issue: is.IssueAgent, NATSURL: cfg.AgentURL(), PerMinute: cfg.Enrollment.Rate, UpdatePublicKey: cfg.Enrollment.UpdatePublicKey}, nil
}
