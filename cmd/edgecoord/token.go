package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
)

// tokenCommands are "token create|list|revoke": the API tokens of the
// HTTP API (docs/api.md, "Tokens and scopes").
func (m *mgmt) tokenCommands() []*cli.Command {
	return []*cli.Command{m.tokenCreateCommand(), m.tokenListCommand(), m.tokenRevokeCommand()}
}

// apiStore opens the store with its API tables.
func (m *mgmt) apiStore(ctx context.Context, c *cli.Call) (jobstore.APIStore, func(), error) {
	store, err := m.open(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	as, ok := store.(jobstore.APIStore)
	if !ok {
		store.Close()
		return nil, nil, fmt.Errorf("the store %T keeps no API tokens", store)
	}
	return as, func() { store.Close() }, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// tokenView is a token as printed with --json; Token only at creation.
type tokenView struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Projects   []string   `json:"projects"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Token      string     `json:"token,omitempty"`
}

func newTokenView(t jobstore.APIToken) tokenView {
	v := tokenView{ID: t.ID, Name: t.Name, Projects: t.Projects, Scopes: t.Scopes, CreatedAt: t.CreatedAt}
	if !t.RevokedAt.IsZero() {
		at := t.RevokedAt
		v.RevokedAt = &at
	}
	if !t.LastUsedAt.IsZero() {
		at := t.LastUsedAt
		v.LastUsedAt = &at
	}
	return v
}

func (m *mgmt) tokenCreateCommand() *cli.Command {
	var name, projects, scopes string
	return &cli.Command{
		Name:    "token create",
		Summary: "create an API token and print it, once: only its hash is kept",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&name, "name", "", "the token's `name`, recorded as submitted_by of its jobs (default: token-RANDOM)")
			fs.StringVar(&projects, "project", "", "the `projects` the token sees and touches, comma-separated (required)")
			fs.StringVar(&scopes, "scopes", "read", "what the token may do, comma-separated `scopes`: read, submit, operate, admin")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			ps, ss := splitList(projects), splitList(scopes)
			if len(ps) == 0 {
				return c.Usagef("--project is required")
			}
			for _, p := range ps {
				if err := jobstore.CheckProject(p); err != nil {
					return c.Usagef("--project: %v", err)
				}
			}
			if err := jobstore.CheckScopes(ss); err != nil {
				return c.Usagef("--scopes: %v", err)
			}
			if name == "" {
				var b [4]byte
				_, _ = rand.Read(b[:])
				name = "token-" + hex.EncodeToString(b[:])
			}
			if err := jobstore.CheckTokenName(name); err != nil {
				return c.Usagef("--name: %v", err)
			}
			store, closeStore, err := m.apiStore(ctx, c)
			if err != nil {
				return err
			}
			defer closeStore()
			secret, hash, err := api.NewToken()
			if err != nil {
				return err
			}
			t, err := store.CreateAPIToken(ctx, jobstore.APIToken{Name: name, Hash: hash, Projects: ps, Scopes: ss})
			if errors.Is(err, jobstore.ErrTokenExists) {
				return c.Failf("a token named %s exists already: choose another --name, or revoke it first", name)
			}
			if err != nil {
				return err
			}
			if c.JSON {
				v := newTokenView(t)
				v.Token = secret
				return c.PrintJSON(v)
			}
			// The token alone on standard output, so that
			// TOKEN=$(edgecoord token create ...) works; the rest on
			// standard error.
			fmt.Fprintf(c.Stderr, "token %s (id %d) created for projects %s with scopes %s; it is shown this once:\n",
				t.Name, t.ID, strings.Join(t.Projects, ","), strings.Join(t.Scopes, ","))
			_, err = fmt.Fprintln(c.Stdout, secret)
			return err
		},
	}
}

func (m *mgmt) tokenListCommand() *cli.Command {
	return &cli.Command{
		Name:    "token list",
		Summary: "list the API tokens (never their secrets)",
		JSON:    true,
		Flags:   m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, closeStore, err := m.apiStore(ctx, c)
			if err != nil {
				return err
			}
			defer closeStore()
			ts, err := store.APITokens(ctx)
			if err != nil {
				return err
			}
			if c.JSON {
				views := make([]tokenView, 0, len(ts))
				for _, t := range ts {
					views = append(views, newTokenView(t))
				}
				return c.PrintJSON(views)
			}
			now := m.now()
			tw := c.Table()
			fmt.Fprintln(tw, "ID\tNAME\tPROJECTS\tSCOPES\tCREATED\tLAST USED\tSTATE")
			for _, t := range ts {
				state := "valid"
				if t.Revoked() {
					state = "revoked " + age(now, t.RevokedAt) + " ago"
				}
				last := "never"
				if !t.LastUsedAt.IsZero() {
					last = age(now, t.LastUsedAt) + " ago"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s ago\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Projects, ","), strings.Join(t.Scopes, ","),
					age(now, t.CreatedAt), last, state)
			}
			return tw.Flush()
		},
	}
}

func (m *mgmt) tokenRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:      "token revoke",
		Summary:   "revoke an API token by name or id: it is refused from then on",
		Args:      "NAME|ID",
		CheckArgs: cli.ExactArgs(1, "NAME|ID"),
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, closeStore, err := m.apiStore(ctx, c)
			if err != nil {
				return err
			}
			defer closeStore()
			t, err := store.RevokeAPIToken(ctx, c.Args[0])
			if errors.Is(err, jobstore.ErrTokenNotFound) {
				return c.Failf("no token named or numbered %s (edgecoord token list shows them)", c.Args[0])
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.Stdout, "token %s (id %d) revoked\n", t.Name, t.ID)
			return err
		},
	}
}
