package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// agentColumns ends with the seconds since last_seen on the database clock.
const agentColumns = sqlstore.AgentColumns + `EXTRACT(EPOCH FROM (clock_timestamp() - last_seen))::float8`

func scanAgent(row sqlstore.Row) (jobstore.Agent, error) { return sqlstore.ScanAgent(row, times) }

const helloSQL = `
	INSERT INTO agents (agent_id, boot_id, version, devices, capabilities, slots, coordinator_id, agent_draining, connected_at, last_seen)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp(), clock_timestamp())
	ON CONFLICT (agent_id) DO UPDATE SET
		boot_id = EXCLUDED.boot_id,
		agent_draining = EXCLUDED.agent_draining,
		version = EXCLUDED.version,
		devices = EXCLUDED.devices,
		capabilities = EXCLUDED.capabilities,
		slots = EXCLUDED.slots,
		coordinator_id = EXCLUDED.coordinator_id,
		connected_at = CASE WHEN agents.boot_id = EXCLUDED.boot_id AND agents.connected_at IS NOT NULL
		                    THEN agents.connected_at ELSE EXCLUDED.connected_at END,
		last_seen = EXCLUDED.last_seen
	RETURNING ` + agentColumns

// releaseOtherBootsSQL ends, in one statement, the attempt of every
// in-progress job of agent $1 held by a boot other than owner $2, an
// infrastructure failure with cause agent_restarted (backoff $3 and $4 µs):
// retried or FAILED as in reclaimSQL, each recorded as a reclaim of the
// token taken away.
var releaseOtherBootsSQL = releaseAgentSQL(protocol.CauseAgentRestarted, jobstore.DetailAgentRestarted)

// releaseAgentSQL is releaseOtherBootsSQL with another cause and detail
// (an owner $2 of "" releases the jobs of every boot).
func releaseAgentSQL(cause, detail string) string {
	return `
	WITH cand AS (
		SELECT id, lease_generation, worker_id FROM jobs
		WHERE status = 'IN_PROGRESS' AND left(worker_id, length($1) + 1) = $1 || '/' AND worker_id <> $2
		ORDER BY id
		FOR UPDATE
	), upd AS (
		UPDATE jobs j
		SET ` + strings.NewReplacer("$2", "$3", "$3", "$4").Replace(infraEnd(cause)) + `
		FROM cand
		WHERE j.id = cand.id AND j.status = 'IN_PROGRESS'
		  AND j.lease_generation = cand.lease_generation AND j.worker_id = cand.worker_id
		RETURNING j.id, cand.worker_id AS old_owner, cand.lease_generation AS old_generation
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail, class, cause)
		SELECT id, '` + jobstore.VerbReclaim + `', old_owner, old_generation, true, '` + detail + `',
		       '` + protocol.FailClassInfrastructure + `', '` + cause + `' FROM upd
	)
	SELECT id, old_owner, old_generation FROM upd ORDER BY id`
}

// AgentHello records the agent's session and reclaims the jobs of its
// other boots, under the agent's grant lock so no grant to an old boot can
// slip in between.
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
	err := s.inAgentTx(ctx, h.AgentID, func(tx pgx.Tx) error {
		var err error
		a, err = scanAgent(tx.QueryRow(ctx, helloSQL, h.AgentID, h.BootID, h.Version,
			sqlstore.EncodeDevices(h.Devices), sqlstore.EncodeStrings(h.Capabilities), int32(max(1, h.Slots)), h.CoordinatorID, h.Draining))
		if err != nil {
			return err
		}
		toks, err = s.releaseAgent(ctx, tx, releaseOtherBootsSQL, h.AgentID, owner)
		return err
	})
	if err != nil {
		return jobstore.Agent{}, nil, fmt.Errorf("record hello of %s: %w", owner, err)
	}
	return a, toks, nil
}

// releaseAgent runs a releaseAgentSQL statement for agentID and the owner
// it keeps, and returns the tokens it took away.
func (s *Store) releaseAgent(ctx context.Context, tx pgx.Tx, release, agentID, keep string) ([]fencing.Token, error) {
	base, maxB := s.backoffArgs()
	rows, err := tx.Query(ctx, release, agentID, keep, base, maxB)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.Token, error) {
		var t fencing.Token
		err := r.Scan(&t.JobID, &t.Owner, &t.Generation)
		return t, err
	})
}

// AgentHeartbeat marks the session seen now.
func (s *Store) AgentHeartbeat(ctx context.Context, hb jobstore.AgentBeat) (jobstore.Agent, error) {
	agentID, bootID := hb.AgentID, hb.BootID
	var dev any
	if hb.Devices != nil {
		dev = sqlstore.EncodeDevices(hb.Devices)
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, `
		UPDATE agents SET last_seen = clock_timestamp(), devices = COALESCE($3::jsonb, devices), agent_draining = $4
		WHERE agent_id = $1 AND boot_id = $2 AND boot_id <> ''
		RETURNING `+agentColumns, agentID, bootID, dev, hb.Draining))
	return sqlstore.Found(a, err, jobstore.ErrNoSession, "record heartbeat of %s/%s", agentID, bootID)
}

// Agents lists every registered agent by id.
func (s *Store) Agents(ctx context.Context) ([]jobstore.Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY agent_id`)
	return sqlstore.List(rows, err, scanAgent, "list agents")
}

// GetAgent returns one agent, or ErrAgentNotFound.
func (s *Store) GetAgent(ctx context.Context, agentID string) (jobstore.Agent, error) {
	a, err := scanAgent(s.pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE agent_id = $1`, agentID))
	return sqlstore.Found(a, err, jobstore.ErrAgentNotFound, "get agent %s", agentID)
}

// SetAgentDraining sets or clears the drain flag. It takes the agent's
// grant lock, so a grant in flight finishes first and no grant follows.
func (s *Store) SetAgentDraining(ctx context.Context, agentID string, draining bool) (jobstore.Agent, error) {
	var a jobstore.Agent
	err := s.inAgentTx(ctx, agentID, func(tx pgx.Tx) error {
		var err error
		a, err = scanAgent(tx.QueryRow(ctx, `UPDATE agents SET draining = $2 WHERE agent_id = $1 RETURNING `+agentColumns, agentID, draining))
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
	if set == nil {
		set = map[string]string{}
	}
	if unset == nil {
		unset = []string{}
	}
	setJSON, err := json.Marshal(set)
	if err != nil {
		return jobstore.Agent{}, fmt.Errorf("set settings of agent %s: %w", agentID, err)
	}
	// One statement: insert or merge (jsonb || adds and replaces, - removes).
	a, err := scanAgent(s.pool.QueryRow(ctx, `
		INSERT INTO agents (agent_id, settings) VALUES ($1, $2::jsonb - $3::text[])
		ON CONFLICT (agent_id) DO UPDATE SET settings = (agents.settings || $2::jsonb) - $3::text[]
		RETURNING `+agentColumns, agentID, setJSON, unset))
	if err != nil {
		return jobstore.Agent{}, fmt.Errorf("set settings of agent %s: %w", agentID, err)
	}
	return a, nil
}
