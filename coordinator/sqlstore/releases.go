package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// Querier runs statements on a pool or in a transaction of either
// driver: Exec returns the rows affected.
type Querier interface {
	QueryRow(ctx context.Context, q string, args ...any) Row
	Query(ctx context.Context, q string, args ...any) (ResultSet, error)
	Exec(ctx context.Context, q string, args ...any) (int64, error)
}

// Releases implements jobstore.ReleaseStore once for both stores: the
// statements are written with $N parameters and NOW for the database
// clock, which Rewrite turns into the dialect's.
type Releases[T any] struct {
	Times Times[T]
	// Rewrite turns a statement into the dialect's.
	Rewrite func(q string) string
	// Read runs reads; Tx runs fn in one transaction.
	Read Querier
	Tx   func(ctx context.Context, fn func(q Querier) error) error
	// Unique reports a unique index refusing a write.
	Unique func(error) bool
}

const releaseColumns = `version, os, arch, size, sha256, signature, added_at, added_by`

func (s *Releases[T]) scanRelease(row Row) (jobstore.ReleaseRecord, error) {
	var (
		r     jobstore.ReleaseRecord
		added T
	)
	if err := row.Scan(&r.Version, &r.OS, &r.Arch, &r.Size, &r.SHA256, &r.Signature, &added, &r.AddedBy); err != nil {
		return jobstore.ReleaseRecord{}, err
	}
	var err error
	r.AddedAt, err = s.Times(added)
	return r, err
}

// AddRelease records a release, or returns the one recorded.
func (s *Releases[T]) AddRelease(ctx context.Context, r jobstore.ReleaseRecord) (jobstore.ReleaseRecord, bool, error) {
	if err := r.Validate(); err != nil {
		return jobstore.ReleaseRecord{}, false, fmt.Errorf("add release: %w", err)
	}
	rec, err := s.scanRelease(s.Read.QueryRow(ctx, s.Rewrite(`
		INSERT INTO releases (version, os, arch, size, sha256, signature, added_by) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (version, os, arch) DO NOTHING
		RETURNING `+releaseColumns), r.Version, r.OS, r.Arch, r.Size, r.SHA256, r.Signature, r.AddedBy))
	if errors.Is(err, sql.ErrNoRows) {
		rec, err = s.GetRelease(ctx, r.Version, r.OS, r.Arch)
		if err == nil && rec.SHA256 != r.SHA256 {
			return rec, false, fmt.Errorf("release %s %s/%s is recorded with sha256 %s: %w", r.Version, r.OS, r.Arch, rec.SHA256, jobstore.ErrReleaseConflict)
		}
		return rec, false, err
	}
	if err != nil {
		return jobstore.ReleaseRecord{}, false, fmt.Errorf("add release %s %s/%s: %w", r.Version, r.OS, r.Arch, err)
	}
	return rec, true, nil
}

// GetRelease returns a release.
func (s *Releases[T]) GetRelease(ctx context.Context, version, goos, goarch string) (jobstore.ReleaseRecord, error) {
	rec, err := s.scanRelease(s.Read.QueryRow(ctx, s.Rewrite(`SELECT `+releaseColumns+` FROM releases WHERE version = $1 AND os = $2 AND arch = $3`),
		version, goos, goarch))
	return Found(rec, err, jobstore.ErrReleaseNotFound, "get release %.64q %.20q/%.20q", version, goos, goarch)
}

// ListReleases lists releases newest first.
func (s *Releases[T]) ListReleases(ctx context.Context) ([]jobstore.ReleaseRecord, error) {
	rows, err := s.Read.Query(ctx, s.Rewrite(`SELECT `+releaseColumns+` FROM releases ORDER BY id DESC LIMIT $1`), jobstore.MaxReleaseList)
	return List(rows, err, s.scanRelease, "list releases")
}

// SetAgentUpdate records an agent's update state.
func (s *Releases[T]) SetAgentUpdate(ctx context.Context, agentID string, st protocol.UpdateStatus) error {
	st, err := jobstore.CleanUpdateStatus(st)
	if err != nil {
		return err
	}
	_, err = s.Read.Exec(ctx, s.Rewrite(`
		INSERT INTO agent_updates (agent_id, state, target, outcome, at_ms, rollout_id) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (agent_id) DO UPDATE SET state = excluded.state, target = excluded.target, outcome = excluded.outcome,
			at_ms = excluded.at_ms, rollout_id = excluded.rollout_id, reported_at = NOW`),
		agentID, st.State, st.Target, st.Outcome, st.AtUnixMilli, st.RolloutID)
	if err != nil {
		return fmt.Errorf("set update state of agent %s: %w", agentID, err)
	}
	return nil
}

// AgentUpdates returns every agent's last update state.
func (s *Releases[T]) AgentUpdates(ctx context.Context) ([]jobstore.AgentUpdate, error) {
	rows, err := s.Read.Query(ctx, `SELECT agent_id, state, target, outcome, at_ms, rollout_id, reported_at FROM agent_updates ORDER BY agent_id`)
	return List(rows, err, func(row Row) (jobstore.AgentUpdate, error) {
		var (
			u  jobstore.AgentUpdate
			at T
		)
		if err := row.Scan(&u.AgentID, &u.State, &u.Target, &u.Outcome, &u.AtUnixMilli, &u.RolloutID, &at); err != nil {
			return u, err
		}
		var err error
		u.ReportedAt, err = s.Times(at)
		return u, err
	}, "list agent update states")
}

const rolloutColumns = `id, version, agents, steps, max_failures, allow_downgrade, timeout_ms, state, step, reason, failure_base, created_by, created_at, updated_at`

func (s *Releases[T]) scanRollout(row Row) (jobstore.Rollout, error) {
	var (
		r                jobstore.Rollout
		steps            string
		created, updated T
	)
	if err := row.Scan(&r.ID, &r.Version, &r.Agents, &steps, &r.MaxFailures, &r.AllowDowngrade, &r.TimeoutMS, &r.State, &r.Step,
		&r.Reason, &r.FailureBase, &r.CreatedBy, &created, &updated); err != nil {
		return jobstore.Rollout{}, err
	}
	for f := range strings.SplitSeq(steps, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return jobstore.Rollout{}, fmt.Errorf("rollout %s: steps %q: %w", r.ID, steps, err)
		}
		r.Steps = append(r.Steps, n)
	}
	var err error
	if r.CreatedAt, err = s.Times(created); err != nil {
		return r, err
	}
	r.UpdatedAt, err = s.Times(updated)
	return r, err
}

// CreateRollout records a running rollout.
func (s *Releases[T]) CreateRollout(ctx context.Context, r jobstore.Rollout) (jobstore.Rollout, error) {
	if err := r.Validate(); err != nil {
		return jobstore.Rollout{}, fmt.Errorf("create rollout: %w", err)
	}
	steps := make([]string, len(r.Steps))
	for i, p := range r.Steps {
		steps[i] = strconv.Itoa(p)
	}
	var out jobstore.Rollout
	err := s.Tx(ctx, func(q Querier) error {
		var n int
		if err := q.QueryRow(ctx, s.Rewrite(`SELECT count(*) FROM rollouts WHERE id = $1`), r.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("rollout id %s is taken: %w", r.ID, jobstore.ErrConflict)
		}
		var err error
		out, err = s.scanRollout(q.QueryRow(ctx, s.Rewrite(`
			INSERT INTO rollouts (id, version, agents, steps, max_failures, allow_downgrade, timeout_ms, state, active, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', 1, $8)
			RETURNING `+rolloutColumns), r.ID, r.Version, r.Agents, strings.Join(steps, ","), r.MaxFailures, r.AllowDowngrade, r.TimeoutMS, r.CreatedBy))
		if err != nil && s.Unique(err) {
			return jobstore.ErrRolloutActive
		}
		return err
	})
	if err != nil {
		return jobstore.Rollout{}, fmt.Errorf("create rollout %s: %w", r.ID, err)
	}
	return out, nil
}

// GetRollout returns a rollout.
func (s *Releases[T]) GetRollout(ctx context.Context, id string) (jobstore.Rollout, error) {
	r, err := s.scanRollout(s.Read.QueryRow(ctx, s.Rewrite(`SELECT `+rolloutColumns+` FROM rollouts WHERE id = $1`), id))
	return Found(r, err, jobstore.ErrRolloutNotFound, "get rollout %.64q", id)
}

// ListRollouts lists rollouts newest first.
func (s *Releases[T]) ListRollouts(ctx context.Context, active bool) ([]jobstore.Rollout, error) {
	where := ``
	if active {
		where = `WHERE active IS NOT NULL `
	}
	rows, err := s.Read.Query(ctx, s.Rewrite(`SELECT `+rolloutColumns+` FROM rollouts `+where+`ORDER BY seq DESC LIMIT $1`), jobstore.MaxRolloutList)
	return List(rows, err, s.scanRollout, "list rollouts")
}

// ChangeRollout moves a rollout between states.
func (s *Releases[T]) ChangeRollout(ctx context.Context, c jobstore.RolloutChange) (jobstore.Rollout, error) {
	var out jobstore.Rollout
	err := s.Tx(ctx, func(q Querier) error {
		cur, err := s.scanRollout(q.QueryRow(ctx, s.Rewrite(`SELECT `+rolloutColumns+` FROM rollouts WHERE id = $1`), c.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return jobstore.ErrRolloutNotFound
		}
		if err != nil {
			return err
		}
		ok := false
		for _, f := range c.From {
			ok = ok || cur.State == f
		}
		if !ok {
			out = cur
			return fmt.Errorf("rollout %s is %s: %w", c.ID, cur.State, jobstore.ErrRolloutState)
		}
		base := `failure_base`
		if c.ResetFailures {
			base = `(SELECT count(*) FROM rollout_agents WHERE rollout_id = $1 AND state = 'failed')`
		}
		active := `1`
		if c.To != jobstore.RolloutRunning && c.To != jobstore.RolloutPaused {
			active = `NULL`
		}
		out, err = s.scanRollout(q.QueryRow(ctx, s.Rewrite(`
			UPDATE rollouts SET state = $2, reason = $3, failure_base = `+base+`, active = `+active+`, updated_at = NOW
			WHERE id = $1 RETURNING `+rolloutColumns), c.ID, c.To, jobstore.CutReason(c.Reason)))
		return err
	})
	if err != nil {
		return out, fmt.Errorf("change rollout %.64q to %s: %w", c.ID, c.To, err)
	}
	return out, nil
}

// AdvanceRollout moves a running rollout on from step.
func (s *Releases[T]) AdvanceRollout(ctx context.Context, id string, step int) (jobstore.Rollout, error) {
	var out jobstore.Rollout
	err := s.Tx(ctx, func(q Querier) error {
		cur, err := s.scanRollout(q.QueryRow(ctx, s.Rewrite(`SELECT `+rolloutColumns+` FROM rollouts WHERE id = $1`), id))
		if errors.Is(err, sql.ErrNoRows) {
			return jobstore.ErrRolloutNotFound
		}
		if err != nil {
			return err
		}
		if cur.State != jobstore.RolloutRunning || cur.Step != step {
			return fmt.Errorf("rollout %s is %s at step %d: %w", id, cur.State, cur.Step+1, jobstore.ErrRolloutState)
		}
		if step+1 < len(cur.Steps) {
			out, err = s.scanRollout(q.QueryRow(ctx, s.Rewrite(`
				UPDATE rollouts SET step = step + 1, updated_at = NOW WHERE id = $1 AND state = 'running' AND step = $2
				RETURNING `+rolloutColumns), id, step))
		} else {
			out, err = s.scanRollout(q.QueryRow(ctx, s.Rewrite(`
				UPDATE rollouts SET state = 'completed', active = NULL, reason = $3, updated_at = NOW
				WHERE id = $1 AND state = 'running' AND step = $2
				RETURNING `+rolloutColumns), id, step, "every step done"))
		}
		if errors.Is(err, sql.ErrNoRows) {
			return jobstore.ErrRolloutState
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("advance rollout %.64q: %w", id, err)
	}
	return out, nil
}

const rolloutAgentColumns = `rollout_id, agent_id, step, state, outcome, sent_at, ended_at`

func (s *Releases[T]) scanRolloutAgent(row Row) (jobstore.RolloutAgent, error) {
	var (
		a     jobstore.RolloutAgent
		sent  T
		ended *T
	)
	if err := row.Scan(&a.RolloutID, &a.AgentID, &a.Step, &a.State, &a.Outcome, &sent, &ended); err != nil {
		return a, err
	}
	var err error
	if a.SentAt, err = s.Times(sent); err != nil {
		return a, err
	}
	a.EndedAt, err = s.Times.Null(ended)
	return a, err
}

// RolloutAgents lists a rollout's agents by agent id.
func (s *Releases[T]) RolloutAgents(ctx context.Context, id string) ([]jobstore.RolloutAgent, error) {
	rows, err := s.Read.Query(ctx, s.Rewrite(`SELECT `+rolloutAgentColumns+` FROM rollout_agents WHERE rollout_id = $1 ORDER BY agent_id`), id)
	return List(rows, err, s.scanRolloutAgent, "list the agents of rollout %.64q", id)
}

// StartRolloutAgent claims an agent for a step of a rollout.
func (s *Releases[T]) StartRolloutAgent(ctx context.Context, a jobstore.RolloutAgent, limit int) (bool, error) {
	started := false
	err := s.Tx(ctx, func(q Querier) error {
		// The rollout's row is written first: on PostgreSQL its lock
		// makes the count below see the claims of other coordinators.
		n, err := q.Exec(ctx, s.Rewrite(`UPDATE rollouts SET updated_at = NOW WHERE id = $1 AND state = 'running' AND step = $2`), a.RolloutID, a.Step)
		if err != nil || n == 0 {
			return err
		}
		n, err = q.Exec(ctx, s.Rewrite(`
			INSERT INTO rollout_agents (rollout_id, agent_id, step, state)
			SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS INTEGER), 'updating'
			WHERE (SELECT count(*) FROM rollout_agents WHERE rollout_id = $1) < $4
			ON CONFLICT (rollout_id, agent_id) DO NOTHING`), a.RolloutID, a.AgentID, a.Step, limit)
		started = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("start agent %s in rollout %s: %w", a.AgentID, a.RolloutID, err)
	}
	return started, nil
}

// EndRolloutAgent ends an updating agent of a rollout.
func (s *Releases[T]) EndRolloutAgent(ctx context.Context, a jobstore.RolloutAgent) (bool, error) {
	if a.State != jobstore.RolloutAgentDone && a.State != jobstore.RolloutAgentFailed {
		return false, fmt.Errorf("end agent %s in rollout %s: state %q is not done or failed", a.AgentID, a.RolloutID, a.State)
	}
	n, err := s.Read.Exec(ctx, s.Rewrite(`
		UPDATE rollout_agents SET state = $3, outcome = $4, ended_at = NOW
		WHERE rollout_id = $1 AND agent_id = $2 AND state = 'updating'`), a.RolloutID, a.AgentID, a.State, jobstore.CutReason(a.Outcome))
	if err != nil {
		return false, fmt.Errorf("end agent %s in rollout %s: %w", a.AgentID, a.RolloutID, err)
	}
	return n == 1, nil
}

var paramRE = regexp.MustCompile(`\$([0-9]+)`)

// RewriteNow puts now, the dialect's database clock, for NOW in q.
func RewriteNow(q, now string) string { return strings.ReplaceAll(q, "NOW", now) }

// RewriteSQLite turns q into SQLite's dialect: ?N parameters and now for
// NOW.
func RewriteSQLite(q, now string) string { return paramRE.ReplaceAllString(RewriteNow(q, now), "?$1") }
