package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// agentColumns ends with the seconds since last_seen on the database clock.
const agentColumns = sqlstore.AgentColumns + `(julianday('now') - julianday(last_seen)) * 86400.0`

func scanAgent(row sqlstore.Row) (jobstore.Agent, error) { return sqlstore.ScanAgent(row, times) }

var helloSQL = `
	INSERT INTO agents (agent_id, boot_id, version, devices, capabilities, slots, coordinator_id, agent_draining, connected_at, last_seen)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ` + now + `, ` + now + `)
	ON CONFLICT (agent_id) DO UPDATE SET
		boot_id = excluded.boot_id,
		agent_draining = excluded.agent_draining,
		version = excluded.version,
		devices = excluded.devices,
		capabilities = excluded.capabilities,
		slots = excluded.slots,
		coordinator_id = excluded.coordinator_id,
		connected_at = CASE WHEN agents.boot_id = excluded.boot_id AND agents.connected_at IS NOT NULL
		                    THEN agents.connected_at ELSE excluded.connected_at END,
		last_seen = excluded.last_seen
	RETURNING ` + agentColumns

// releaseOtherBootSQL ends the attempt of a job held by another boot of
// the agent (cause agent_restarted).
var releaseOtherBootSQL = releaseSQL(protocol.CauseAgentRestarted, "")

// AgentHello records the agent's session and, in the same transaction,
// reclaims the in-progress jobs of its other boots.
func (s *Store) AgentHello(ctx context.Context, h jobstore.AgentHello) (jobstore.Agent, []fencing.Token, error) {
	if err := sqlstore.CheckAgentID(h.AgentID); err != nil {
		return jobstore.Agent{}, nil, fmt.Errorf("record hello: %w", err)
	}
	if h.BootID == "" {
		return jobstore.Agent{}, nil, fmt.Errorf("record hello of %s: boot id is empty", h.AgentID)
	}
	owner := fencing.Owner(h.AgentID, h.BootID)
	var (
		a    jobstore.Agent
		toks []fencing.Token
	)
	err := s.write(ctx, func(tx txn) error {
		var err error
		a, err = scanAgent(tx.QueryRowContext(ctx, helloSQL, h.AgentID, h.BootID, h.Version,
			string(sqlstore.EncodeDevices(h.Devices)), string(sqlstore.EncodeStrings(h.Capabilities)), max(1, h.Slots), h.CoordinatorID, h.Draining))
		if err != nil {
			return err
		}
		toks, err = s.releaseEach(ctx, tx, `SELECT id, lease_generation, worker_id FROM jobs
			WHERE status = 'IN_PROGRESS' AND substr(worker_id, 1, length(?1) + 1) = ?1 || '/' AND worker_id <> ?2
			ORDER BY id`, []any{h.AgentID, owner}, releaseOtherBootSQL, jobstore.DetailAgentRestarted, protocol.CauseAgentRestarted)
		return err
	})
	if err != nil {
		return jobstore.Agent{}, nil, fmt.Errorf("record hello of %s: %w", owner, err)
	}
	return a, toks, nil
}

// AgentHeartbeat marks the session seen now.
func (s *Store) AgentHeartbeat(ctx context.Context, hb jobstore.AgentBeat) (jobstore.Agent, error) {
	agentID, bootID := hb.AgentID, hb.BootID
	var dev any
	if hb.Devices != nil {
		dev = string(sqlstore.EncodeDevices(hb.Devices))
	}
	var a jobstore.Agent
	err := s.write(ctx, func(tx txn) error {
		var err error
		a, err = scanAgent(tx.QueryRowContext(ctx, `
			UPDATE agents SET last_seen = `+now+`, devices = COALESCE(?3, devices), agent_draining = ?4
			WHERE agent_id = ?1 AND boot_id = ?2 AND boot_id <> ''
			RETURNING `+agentColumns, agentID, bootID, dev, hb.Draining))
		return err
	})
	return sqlstore.Found(a, err, jobstore.ErrNoSession, "record heartbeat of %s/%s", agentID, bootID)
}

// Agents lists every registered agent by id.
func (s *Store) Agents(ctx context.Context) ([]jobstore.Agent, error) {
	rows, err := s.query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY agent_id`)
	return sqlstore.List(rows, err, scanAgent, "list agents")
}

// GetAgent returns one agent, or ErrAgentNotFound.
func (s *Store) GetAgent(ctx context.Context, agentID string) (jobstore.Agent, error) {
	a, err := scanAgent(s.rc.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE agent_id = ?`, agentID))
	return sqlstore.Found(a, err, jobstore.ErrAgentNotFound, "get agent %s", agentID)
}

// SetAgentDraining sets or clears the drain flag.
func (s *Store) SetAgentDraining(ctx context.Context, agentID string, draining bool) (jobstore.Agent, error) {
	var a jobstore.Agent
	err := s.write(ctx, func(tx txn) error {
		var err error
		a, err = scanAgent(tx.QueryRowContext(ctx, `UPDATE agents SET draining = ? WHERE agent_id = ? RETURNING `+agentColumns, draining, agentID))
		return err
	})
	return sqlstore.Found(a, err, jobstore.ErrAgentNotFound, "set drain of agent %s", agentID)
}

// SetAgentSettings merges settings into the agent's, creating the agent
// without a session when it is not registered yet.
func (s *Store) SetAgentSettings(ctx context.Context, agentID string, set map[string]string, unset []string) (jobstore.Agent, error) {
	if err := sqlstore.CheckAgentID(agentID); err != nil {
		return jobstore.Agent{}, fmt.Errorf("set settings of agent: %w", err)
	}
	var a jobstore.Agent
	err := s.write(ctx, func(tx txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents (agent_id) VALUES (?) ON CONFLICT (agent_id) DO NOTHING`, agentID); err != nil {
			return err
		}
		var cur string
		if err := tx.QueryRowContext(ctx, `SELECT settings FROM agents WHERE agent_id = ?`, agentID).Scan(&cur); err != nil {
			return err
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(cur), &m); err != nil {
			return fmt.Errorf("decode settings: %w", err)
		}
		b, err := json.Marshal(sqlstore.MergeSettings(m, set, unset))
		if err != nil {
			return err
		}
		a, err = scanAgent(tx.QueryRowContext(ctx, `UPDATE agents SET settings = ? WHERE agent_id = ? RETURNING `+agentColumns, string(b), agentID))
		return err
	})
	if err != nil {
		return jobstore.Agent{}, fmt.Errorf("set settings of agent %s: %w", agentID, err)
	}
	return a, nil
}
