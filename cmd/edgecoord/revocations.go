package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/session"
)

// revokeCheck is how often the API's process looks for tokens revoked
// since (edgecoord token revoke writes only the store): what a revoked
// token holds open ends within it (docs/security.md, "Limits of the HTTP API").
const revokeCheck = 2 * time.Second

// revocations ends what a revoked token holds open in this process: its
// event streams and long polls (API and dashboard), its MCP client
// sessions and the phone sessions it opened. newAPI fills in the parts it
// builds.
type revocations struct {
	store    jobstore.APIStore
	streams  *api.Streams
	mcp      *mcp.Server
	sessions *session.Manager
	log      zerolog.Logger
}

// run checks the store's tokens every revokeCheck until ctx is done.
// Tokens revoked before it started hold nothing open here.
func (v *revocations) run(ctx context.Context) {
	done := map[int64]bool{}
	first := true
	t := time.NewTicker(revokeCheck)
	defer t.Stop()
	for {
		toks, err := v.store.APITokens(ctx)
		if err != nil && ctx.Err() == nil {
			v.log.Warn().Err(err).Msg("list api tokens for revocations")
		}
		for _, tok := range toks {
			if !tok.Revoked() || done[tok.ID] {
				continue
			}
			done[tok.ID] = true
			if !first {
				v.end(ctx, tok)
			}
		}
		if err == nil {
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// end ends what tok holds open.
func (v *revocations) end(ctx context.Context, tok jobstore.APIToken) {
	streams := v.streams.EndToken(tok.ID)
	clients := 0
	if v.mcp != nil {
		clients = v.mcp.EndToken(tok.ID)
	}
	phones := 0
	if v.sessions != nil {
		phones = v.sessions.CloseOwnedBy(ctx, tok.Name, "token "+tok.Name+" was revoked")
	}
	v.log.Info().Str("token_name", tok.Name).Int("streams", streams).Int("mcp_sessions", clients).
		Int("phone_sessions", phones).Msg("api: ended what a revoked token held open")
}
