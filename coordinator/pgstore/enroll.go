package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

var _ jobstore.EnrollStore = (*Store)(nil)

const enrollmentColumns = `agent_id, code_hash, created_at, expires_at, used_at, COALESCE(public_key, '')`

func scanEnrollment(row pgx.Row) (jobstore.Enrollment, error) {
	var (
		e    jobstore.Enrollment
		used *time.Time
	)
	if err := row.Scan(&e.AgentID, &e.CodeHash, &e.CreatedAt, &e.ExpiresAt, &used, &e.PublicKey); err != nil {
		return e, err
	}
	e.CreatedAt, e.ExpiresAt = e.CreatedAt.UTC(), e.ExpiresAt.UTC()
	if used != nil {
		e.UsedAt = used.UTC()
	}
	return e, nil
}

// CreateEnrollment records a code that expires ttl from now.
func (s *Store) CreateEnrollment(ctx context.Context, agentID, codeHash string, ttl time.Duration) (jobstore.Enrollment, error) {
	if err := sqlstore.CheckAgentID(agentID); err != nil {
		return jobstore.Enrollment{}, fmt.Errorf("create enrollment: %w", err)
	}
	if ttl <= 0 || ttl > jobstore.MaxEnrollmentTTL {
		return jobstore.Enrollment{}, fmt.Errorf("create enrollment: expiry %s not within (0, %s]", ttl, jobstore.MaxEnrollmentTTL)
	}
	e, err := scanEnrollment(s.pool.QueryRow(ctx, `
		INSERT INTO enrollments (code_hash, agent_id, expires_at)
		SELECT $1, $2, clock_timestamp() + make_interval(secs => $3::float8 / 1e6)
		WHERE NOT EXISTS (SELECT 1 FROM agent_revocations WHERE agent_id = $2)
		RETURNING `+enrollmentColumns, codeHash, agentID, micros(ttl)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = jobstore.ErrAgentRevoked
	}
	if err != nil {
		return jobstore.Enrollment{}, fmt.Errorf("create enrollment of %s: %w", agentID, err)
	}
	return e, nil
}

// RedeemEnrollment uses a code once: the row lock of the UPDATE makes a
// concurrent redeem wait and then find the code used.
func (s *Store) RedeemEnrollment(ctx context.Context, codeHash, publicKey string) (jobstore.Enrollment, error) {
	e, err := scanEnrollment(s.pool.QueryRow(ctx, `
		UPDATE enrollments SET used_at = clock_timestamp(), public_key = $2
		WHERE code_hash = $1 AND used_at IS NULL AND expires_at > clock_timestamp()
		  AND agent_id NOT IN (SELECT agent_id FROM agent_revocations)
		RETURNING `+enrollmentColumns, codeHash, publicKey))
	if errors.Is(err, pgx.ErrNoRows) {
		var used, expired, revoked bool
		err = s.pool.QueryRow(ctx, `
			SELECT used_at IS NOT NULL, expires_at <= clock_timestamp(), agent_id IN (SELECT agent_id FROM agent_revocations)
			FROM enrollments WHERE code_hash = $1`, codeHash).Scan(&used, &expired, &revoked)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = jobstore.ErrEnrollmentUnknown
		case err != nil:
		case revoked:
			err = jobstore.ErrAgentRevoked
		case expired && !used:
			err = jobstore.ErrEnrollmentExpired
		default:
			err = jobstore.ErrEnrollmentUsed
		}
	}
	if err != nil {
		return jobstore.Enrollment{}, fmt.Errorf("redeem enrollment: %w", err)
	}
	return e, nil
}

// revokeReleaseSQL ends the attempts of every job of a revoked agent.
var revokeReleaseSQL = releaseAgentSQL(jobstore.CauseAgentRevoked, jobstore.DetailAgentRevoked)

// RevokeAgent marks the agent revoked and drained and ends its jobs, under
// the agent's grant lock so that no grant slips in between.
func (s *Store) RevokeAgent(ctx context.Context, agentID string) ([]fencing.Token, error) {
	if err := sqlstore.CheckAgentID(agentID); err != nil {
		return nil, fmt.Errorf("revoke agent: %w", err)
	}
	var toks []fencing.Token
	err := s.inAgentTx(ctx, agentID, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agent_revocations (agent_id) VALUES ($1) ON CONFLICT (agent_id) DO NOTHING`, agentID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE agents SET draining = true WHERE agent_id = $1`, agentID); err != nil {
			return err
		}
		var err error
		toks, err = s.releaseAgent(ctx, tx, revokeReleaseSQL, agentID, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("revoke agent %s: %w", agentID, err)
	}
	return toks, nil
}

// RevokedAgents lists the revoked agents.
func (s *Store) RevokedAgents(ctx context.Context) (map[string]time.Time, error) {
	return s.revokedMap(ctx, `SELECT agent_id, revoked_at FROM agent_revocations`)
}

// RevokedKeys lists the keys of the revoked agents' redeemed codes.
func (s *Store) RevokedKeys(ctx context.Context) (map[string]time.Time, error) {
	return s.revokedMap(ctx, `SELECT e.public_key, r.revoked_at FROM enrollments e JOIN agent_revocations r ON r.agent_id = e.agent_id
		WHERE e.public_key IS NOT NULL`)
}

func (s *Store) revokedMap(ctx context.Context, query string) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list revocations: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var (
			k  string
			at time.Time
		)
		if err := rows.Scan(&k, &at); err != nil {
			return nil, fmt.Errorf("list revocations: %w", err)
		}
		out[k] = at.UTC()
	}
	return out, rows.Err()
}
