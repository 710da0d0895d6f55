package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.UIStore = (*Store)(nil)

// CreateUISession stores a dashboard session and deletes the expired ones.
func (s *Store) CreateUISession(ctx context.Context, hash [sha256.Size]byte, tokenID int64, ttl time.Duration) (jobstore.UISession, error) {
	out := jobstore.UISession{Hash: hash, TokenID: tokenID}
	err := s.write(ctx, func(tx txn) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE expires_at <= `+now); err != nil {
			return err
		}
		var created, expires string
		if err := tx.QueryRowContext(ctx, `
			INSERT INTO ui_sessions (hash, token_id, expires_at) VALUES (?, ?, `+nowPlus+`)
			RETURNING created_at, expires_at`, hash[:], tokenID, modifier(ttl)).Scan(&created, &expires); err != nil {
			return err
		}
		var err error
		if out.CreatedAt, err = parseTime(created); err != nil {
			return err
		}
		out.ExpiresAt, err = parseTime(expires)
		return err
	})
	if err != nil {
		return jobstore.UISession{}, fmt.Errorf("create dashboard session: %w", err)
	}
	return out, nil
}

// UISession returns an unexpired session and its token.
func (s *Store) UISession(ctx context.Context, hash [sha256.Size]byte) (jobstore.UISession, jobstore.APIToken, error) {
	sess := jobstore.UISession{Hash: hash}
	var created, expires string
	t, err := scanToken(sqlstore.More(s.rc.QueryRowContext(ctx, `
		SELECT t.id, t.name, t.hash, t.projects, t.scopes, t.created_at, t.revoked_at, t.last_used_at,
		       u.created_at, u.expires_at
		FROM ui_sessions u JOIN api_tokens t ON t.id = u.token_id
		WHERE u.hash = ? AND u.expires_at > `+now, hash[:]), &created, &expires))
	if errors.Is(err, sql.ErrNoRows) {
		return jobstore.UISession{}, jobstore.APIToken{}, jobstore.ErrUISessionNotFound
	}
	if err != nil {
		return jobstore.UISession{}, jobstore.APIToken{}, fmt.Errorf("read dashboard session: %w", err)
	}
	if sess.CreatedAt, err = parseTime(created); err != nil {
		return jobstore.UISession{}, jobstore.APIToken{}, err
	}
	if sess.ExpiresAt, err = parseTime(expires); err != nil {
		return jobstore.UISession{}, jobstore.APIToken{}, err
	}
	sess.TokenID = t.ID
	return sess, t, nil
}

// DeleteUISession deletes a session.
func (s *Store) DeleteUISession(ctx context.Context, hash [sha256.Size]byte) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE hash = ?`, hash[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("delete dashboard session: %w", err)
	}
	return nil
}

// RecordUIAction records a dashboard action.
func (s *Store) RecordUIAction(ctx context.Context, a jobstore.UIAction) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO ui_actions (token_name, action, target, job_id, detail) VALUES (?, ?, ?, ?, ?)`,
			a.TokenName, a.Action, a.Target, a.JobID, a.Detail)
		return err
	})
	if err != nil {
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
	rows, err := s.query(ctx, `
		SELECT id, token_name, action, target, job_id, detail, at FROM (
			SELECT * FROM ui_actions
			WHERE (? = '' OR target = ?) AND (? = '' OR job_id = ?)
			ORDER BY id DESC LIMIT ?)
		ORDER BY id`, f.Target, f.Target, f.JobID, f.JobID, limit)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.UIAction, error) { return sqlstore.ScanUIAction(r, times) }, "list dashboard actions")
}

// PhoneScreens returns the newest screenshot of each phone: one read of
// phone_screens, which RegisterArtifact keeps up to date,
// and of each screenshot's job by its key, to drop the screenshots of a
// generation the job has left (docs/benchmarks.md, "Web dashboard").
func (s *Store) PhoneScreens(ctx context.Context, phones []jobstore.PhoneRef, projects []string) ([]jobstore.PhoneScreen, error) {
	if len(phones) == 0 || (projects != nil && len(projects) == 0) {
		return nil, nil
	}
	// The whole table is read (one row per phone that ever registered an
	// image) and matched here: cheaper than a lookup per listed phone.
	want := make(map[jobstore.PhoneRef]bool, len(phones))
	for _, p := range phones {
		want[p] = true
	}
	var args []any
	cond := ""
	if projects != nil {
		cond = ` WHERE s.project IN (?` + strings.Repeat(`, ?`, len(projects)-1) + `)`
		for _, p := range projects {
			args = append(args, p)
		}
	}
	rows, err := s.rc.QueryContext(ctx, `
		SELECT s.agent_id, s.serial, s.job_id, s.project, s.generation, s.name, s.content_type, s.created_at
		FROM phone_screens s
		JOIN jobs j ON j.id = s.job_id AND j.lease_generation = s.generation`+cond, args...)
	if err != nil {
		return nil, fmt.Errorf("read phone screenshots: %w", err)
	}
	defer rows.Close()
	all, err := sqlstore.Collect(rows, func(r sqlstore.Row) (jobstore.PhoneScreen, error) { return sqlstore.ScanPhoneScreen(r, times) })
	if err != nil {
		return nil, fmt.Errorf("read phone screenshots: %w", err)
	}
	var got []jobstore.PhoneScreen
	for _, x := range all {
		if want[x.PhoneRef] {
			got = append(got, x)
		}
	}
	return got, nil
}

// FleetAgents lists the agents as Agents does, their device lists left as
// stored: scanAgent is handed a JSON null for the devices, and the stored
// JSON is kept in DevicesJSON for the dashboard to decode when it changed.
func (s *Store) FleetAgents(ctx context.Context) ([]jobstore.FleetAgent, error) {
	rows, err := s.query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY agent_id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.FleetAgent, error) { return sqlstore.ScanFleetAgent(r, times) }, "list agents")
}

// RunningJobs lists the jobs in progress, down jobs_in_progress_owner.
func (s *Store) RunningJobs(ctx context.Context) ([]jobstore.RunningJob, error) {
	rows, err := s.query(ctx, `
		SELECT id, project, coalesce(worker_id, ''), coalesce(device_serial, '') FROM jobs
		WHERE status = 'IN_PROGRESS'`)
	return sqlstore.List(rows, err, sqlstore.ScanRunningJob, "list running jobs")
}
