package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.UIStore = (*Store)(nil)

// CreateUISession stores a dashboard session and deletes the expired ones.
func (s *Store) CreateUISession(ctx context.Context, hash [sha256.Size]byte, tokenID int64, ttl time.Duration) (jobstore.UISession, error) {
	out := jobstore.UISession{Hash: hash, TokenID: tokenID}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at <= clock_timestamp()`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO ui_sessions (hash, token_id, expires_at)
			VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 microsecond')
			RETURNING created_at, expires_at`, hash[:], tokenID, ttl.Microseconds()).Scan(&out.CreatedAt, &out.ExpiresAt)
	})
	if err != nil {
		return jobstore.UISession{}, fmt.Errorf("create dashboard session: %w", err)
	}
	return out, nil
}

// UISession returns an unexpired session and its token.
func (s *Store) UISession(ctx context.Context, hash [sha256.Size]byte) (jobstore.UISession, jobstore.APIToken, error) {
	sess := jobstore.UISession{Hash: hash}
	var created, expires time.Time
	t, err := scanToken(sqlstore.More(s.pool.QueryRow(ctx, `
		SELECT t.id, t.name, t.hash, t.projects, t.scopes, t.created_at, t.revoked_at, t.last_used_at,
		       u.created_at, u.expires_at
		FROM ui_sessions u JOIN api_tokens t ON t.id = u.token_id
		WHERE u.hash = $1 AND u.expires_at > clock_timestamp()`, hash[:]), &created, &expires))
	if errors.Is(err, pgx.ErrNoRows) {
		return jobstore.UISession{}, jobstore.APIToken{}, jobstore.ErrUISessionNotFound
	}
	if err != nil {
		return jobstore.UISession{}, jobstore.APIToken{}, fmt.Errorf("read dashboard session: %w", err)
	}
	sess.TokenID, sess.CreatedAt, sess.ExpiresAt = t.ID, created, expires
	return sess, t, nil
}

// DeleteUISession deletes a session.
func (s *Store) DeleteUISession(ctx context.Context, hash [sha256.Size]byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE hash = $1`, hash[:]); err != nil {
		return fmt.Errorf("delete dashboard session: %w", err)
	}
	return nil
}

// RecordUIAction records a dashboard action.
func (s *Store) RecordUIAction(ctx context.Context, a jobstore.UIAction) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO ui_actions (token_name, action, target, job_id, detail) VALUES ($1, $2, $3, $4, $5)`,
		a.TokenName, a.Action, a.Target, a.JobID, a.Detail); err != nil {
		return fmt.Errorf("record dashboard action: %w", err)
	}
	return nil
}

// UIActions lists recorded actions, oldest first.
func (s *Store) UIActions(ctx context.Context, f jobstore.UIActionFilter) ([]jobstore.UIAction, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, token_name, action, target, job_id, detail, at FROM (
			SELECT * FROM ui_actions
			WHERE ($1 = '' OR target = $1) AND ($2 = '' OR job_id = $2)
			ORDER BY id DESC LIMIT $3) x
		ORDER BY id`, f.Target, f.JobID, limit)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.UIAction, error) { return sqlstore.ScanUIAction(r, times) }, "list dashboard actions")
}

// PhoneScreens returns the newest screenshot of each phone: one read of
// phone_screens by its primary key, which RegisterArtifact keeps up to date,
// and of each screenshot's job by its key, to drop the screenshots of a
// generation the job has left (docs/benchmarks.md, "Web dashboard").
func (s *Store) PhoneScreens(ctx context.Context, phones []jobstore.PhoneRef, projects []string) ([]jobstore.PhoneScreen, error) {
	if len(phones) == 0 || (projects != nil && len(projects) == 0) {
		return nil, nil
	}
	agents := make([]string, len(phones))
	serials := make([]string, len(phones))
	for i, p := range phones {
		agents[i], serials[i] = p.AgentID, p.Serial
	}
	rows, err := s.pool.Query(ctx, `
		SELECT s.agent_id, s.serial, s.job_id, s.project, s.generation, s.name, s.content_type, s.created_at
		FROM unnest($1::text[], $2::text[]) AS p(agent_id, serial)
		JOIN phone_screens s ON s.agent_id = p.agent_id AND s.serial = p.serial
		JOIN jobs j ON j.id = s.job_id AND j.lease_generation = s.generation
		WHERE $3::text[] IS NULL OR s.project = ANY ($3)`, agents, serials, projects)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.PhoneScreen, error) { return sqlstore.ScanPhoneScreen(r, times) }, "read phone screenshots")
}

// FleetAgents lists the agents as Agents does, their device lists left as
// stored: scanAgent is handed a JSON null for the devices, and the stored
// JSON is kept in DevicesJSON for the dashboard to decode when it changed.
func (s *Store) FleetAgents(ctx context.Context) ([]jobstore.FleetAgent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY agent_id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.FleetAgent, error) { return sqlstore.ScanFleetAgent(r, times) }, "list agents")
}

// RunningJobs lists the jobs in progress, down jobs_in_progress_owner.
func (s *Store) RunningJobs(ctx context.Context) ([]jobstore.RunningJob, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, project, coalesce(worker_id, ''), coalesce(device_serial, '') FROM jobs
		WHERE status = 'IN_PROGRESS'`)
	return sqlstore.List(rows, err, sqlstore.ScanRunningJob, "list running jobs")
}
