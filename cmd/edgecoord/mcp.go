package main

import (
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/session"
)

// newMCP returns the MCP endpoint (docs/mcp.md) over the session manager
// m, mounted in the API as api.Options.MCP at /mcp.
func newMCP(cfg *config.Coordinator, store jobstore.Store, m *session.Manager, log zerolog.Logger) (*mcp.Server, error) {
	denials, _ := store.(jobstore.APIStore)
	var d mcp.Denials
	if denials != nil {
		d = denials
	}
	return mcp.New(mcp.Options{
		Denials:      d,
		Sessions:     m,
		Store:        store,
		OfflineAfter: cfg.Agents.OfflineAfter.Duration(),
		IdleTimeout:  cfg.API.MCPIdleTimeout.Duration(),
		MaxBodyBytes: cfg.API.MaxBodyBytes.Int64(),
		// api.max_mcp_sessions_per_token (docs/security.md, "Limits of the HTTP API").
		MaxSessionsPerToken: cfg.API.MaxMCPSessionsPerToken,
		Version:             version,
		Log:                 log,
	})
}
