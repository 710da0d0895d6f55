package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

var _ jobstore.EnrollStore = (*Store)(nil)

const enrollmentColumns = `agent_id, code_hash, created_at, expires_at, COALESCE(used_at, ''), COALESCE(public_key, '')`

func scanEnrollment(row sqlstore.Row) (jobstore.Enrollment, error) {
	var (
		e                         jobstore.Enrollment
		created, expires, usedStr string
	)
	if err := row.Scan(&e.AgentID, &e.CodeHash, &created, &expires, &usedStr, &e.PublicKey); err != nil {
		return e, err
	}
	var err error
	if e.CreatedAt, err = parseTime(created); err != nil {
		return e, err
	}
	if e.ExpiresAt, err = parseTime(expires); err != nil {
		return e, err
	}
	if usedStr != "" {
		if e.UsedAt, err = parseTime(usedStr); err != nil {
			return e, err
		}
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
	var e jobstore.Enrollment
	err := s.write(ctx, func(tx txn) error {
		var revoked int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM agent_revocations WHERE agent_id = ?`, agentID).Scan(&revoked); err != nil {
			return err
		}
		if revoked > 0 {
			return jobstore.ErrAgentRevoked
		}
		var err error
		e, err = scanEnrollment(tx.QueryRowContext(ctx, `
			INSERT INTO enrollments (code_hash, agent_id, expires_at) VALUES (?, ?, `+nowPlus+`)
			RETURNING `+enrollmentColumns, codeHash, agentID, fmt.Sprintf("+%.6f seconds", ttl.Seconds())))
		return err
	})
	if err != nil {
		return jobstore.Enrollment{}, fmt.Errorf("create enrollment of %s: %w", agentID, err)
	}
	return e, nil
}

// RedeemEnrollment uses a code once.
func (s *Store) RedeemEnrollment(ctx context.Context, codeHash, publicKey string) (jobstore.Enrollment, error) {
	var e jobstore.Enrollment
	err := s.write(ctx, func(tx txn) error {
		var err error
		e, err = scanEnrollment(tx.QueryRowContext(ctx, `
			UPDATE enrollments SET used_at = `+now+`, public_key = ?2
			WHERE code_hash = ?1 AND used_at IS NULL AND expires_at > `+now+`
			  AND agent_id NOT IN (SELECT agent_id FROM agent_revocations)
			RETURNING `+enrollmentColumns, codeHash, publicKey))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Why not: read in the same transaction.
		var used, expired, revoked bool
		err = tx.QueryRowContext(ctx, `
			SELECT used_at IS NOT NULL, expires_at <= `+now+`, agent_id IN (SELECT agent_id FROM agent_revocations)
			FROM enrollments WHERE code_hash = ?`, codeHash).Scan(&used, &expired, &revoked)
		return redeemRefusal(err, used, expired, revoked)
	})
	if err != nil {
		return jobstore.Enrollment{}, fmt.Errorf("redeem enrollment: %w", err)
	}
	return e, nil
}

// redeemRefusal names why a code was not redeemed.
func redeemRefusal(err error, used, expired, revoked bool) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return jobstore.ErrEnrollmentUnknown
	case err != nil:
		return err
	case revoked:
		return jobstore.ErrAgentRevoked
	case used:
		return jobstore.ErrEnrollmentUsed
	case expired:
		return jobstore.ErrEnrollmentExpired
	}
	return jobstore.ErrEnrollmentUsed
}

// revokeReleaseSQL ends the attempt of a job of a revoked agent.
var revokeReleaseSQL = releaseSQL(jobstore.CauseAgentRevoked, "")

// RevokeAgent marks the agent revoked and drained and ends its jobs.
func (s *Store) RevokeAgent(ctx context.Context, agentID string) ([]fencing.Token, error) {
	if err := sqlstore.CheckAgentID(agentID); err != nil {
		return nil, fmt.Errorf("revoke agent: %w", err)
	}
	var toks []fencing.Token
	err := s.write(ctx, func(tx txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agent_revocations (agent_id) VALUES (?) ON CONFLICT (agent_id) DO NOTHING`, agentID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET draining = 1 WHERE agent_id = ?`, agentID); err != nil {
			return err
		}
		var err error
		toks, err = s.releaseEach(ctx, tx, `SELECT id, lease_generation, worker_id FROM jobs
			WHERE status = 'IN_PROGRESS' AND substr(worker_id, 1, length(?1) + 1) = ?1 || '/'
			ORDER BY id`, []any{agentID}, revokeReleaseSQL, jobstore.DetailAgentRevoked, jobstore.CauseAgentRevoked)
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
	rows, err := s.rc.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list revocations: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var k, at string
		if err := rows.Scan(&k, &at); err != nil {
			return nil, fmt.Errorf("list revocations: %w", err)
		}
		t, err := parseTime(at)
		if err != nil {
			return nil, err
		}
		out[k] = t
	}
	return out, rows.Err()
}
