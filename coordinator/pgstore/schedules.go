package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.ScheduleStore = (*Store)(nil)

const scheduleColumns = sqlstore.ScheduleColumns

func scanSchedule(row sqlstore.Row) (jobstore.Schedule, error) {
	return sqlstore.ScanSchedule(row, times)
}

// slotSelect reads the slots of a schedule with the ids of their jobs.
const slotSelect = `SELECT ` + sqlstore.SlotColumns + `
	COALESCE((SELECT jsonb_agg(jsonb_build_object('id', j.id, 'status', j.status,
	              'phone', COALESCE(j.device_serial, j.task->'device'->>'serial', ''),
	              'not_before_ms', (extract(epoch FROM j.not_before) * 1000)::bigint,
	              'granted_ms', (SELECT (extract(epoch FROM min(w.at)) * 1000)::bigint FROM write_events w
	                             WHERE w.job_id = j.id AND w.verb IN ('claim', 'reassign') AND w.accepted)))
	          FROM jobs j WHERE j.schedule_id = s.schedule_id AND j.scheduled_at = s.scheduled_at), '[]'::jsonb)
	FROM schedule_slots s`

// now reads the database clock.
func (s *Store) now(ctx context.Context, q querier) (time.Time, error) {
	var now time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now.UTC(), nil
}

// nullTime maps the zero time to SQL NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// CreateSchedule stores a schedule with its first slot.
func (s *Store) CreateSchedule(ctx context.Context, sc jobstore.Schedule, limit int, first func(now time.Time) time.Time) (jobstore.Schedule, error) {
	var out jobstore.Schedule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Creates in one project wait for each other, so that concurrent
		// ones count each other against the limit.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, scheduleLockSpace, sc.Project); err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRow(ctx, `
			INSERT INTO schedules (id, project, spec, created_by, next_at)
			SELECT $1::text, $2::text, $3::jsonb, $4::text, $5::timestamptz
			WHERE $6::bigint <= 0 OR (SELECT count(*) FROM schedules WHERE project = $2) < $6
			RETURNING `+scheduleColumns, sc.ID, sc.Project, []byte(sc.Spec), sc.CreatedBy, nullTime(first(now)), limit))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("project %s: %w (%d)", sc.Project, jobstore.ErrScheduleLimit, limit)
		}
		return err
	})
	if err != nil {
		return jobstore.Schedule{}, fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// scheduleLockSpace is the first key of the advisory locks CreateSchedule
// takes per project ("sc").
const scheduleLockSpace int32 = 0x7363

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (jobstore.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = $1`, id))
	return sqlstore.Found(sc, err, jobstore.ErrScheduleNotFound, "get schedule %s", id)
}

// Schedules lists schedules by id.
func (s *Store) Schedules(ctx context.Context, f jobstore.ScheduleFilter) ([]jobstore.Schedule, error) {
	var projects []string
	if f.Projects != nil {
		projects = append([]string{}, f.Projects...)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE ($1::text[] IS NULL OR project = ANY ($1)) ORDER BY id`, projects)
	return sqlstore.List(rows, err, scanSchedule, "list schedules")
}

// DeleteSchedule removes a schedule and its slots.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", id, jobstore.ErrScheduleNotFound)
	}
	return nil
}

// PauseSchedule pauses or resumes a schedule.
func (s *Store) PauseSchedule(ctx context.Context, id string, paused bool, next func(now time.Time) time.Time) (jobstore.Schedule, error) {
	var out jobstore.Schedule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		q := `UPDATE schedules SET paused = true, updated_at = clock_timestamp() WHERE id = $1 RETURNING ` + scheduleColumns
		args := []any{id}
		if !paused {
			q = `UPDATE schedules SET paused = false, next_at = $2, updated_at = clock_timestamp() WHERE id = $1 RETURNING ` + scheduleColumns
			args = append(args, nullTime(next(now)))
		}
		sc, err := scanSchedule(tx.QueryRow(ctx, q, args...))
		out, err = sqlstore.Found(sc, err, jobstore.ErrScheduleNotFound, "pause schedule %s", id)
		return err
	})
	return out, err
}

// DueSchedules returns the database clock and the schedules due at it.
func (s *Store) DueSchedules(ctx context.Context, limit int) (time.Time, []jobstore.Schedule, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return time.Time{}, nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE NOT paused AND (next_at <= $1 OR buffered_at IS NOT NULL)
		ORDER BY next_at NULLS LAST, id LIMIT $2`, now, max(limit, 1))
	due, err := sqlstore.List(rows, err, scanSchedule, "list due schedules")
	return now, due, err
}

// ScheduleSlots lists a schedule's slots, newest first.
func (s *Store) ScheduleSlots(ctx context.Context, id string, limit int) ([]jobstore.Slot, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, slotSelect+` WHERE s.schedule_id = $1 ORDER BY s.scheduled_at DESC LIMIT $2`, id, limit)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.Slot, error) { return sqlstore.ScanSlot(r, times) }, "list slots of schedule %s", id)
}

// LiveScheduleJobs lists the queued and running jobs of a schedule.
func (s *Store) LiveScheduleJobs(ctx context.Context, id string) ([]jobstore.Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE schedule_id = $1 AND status IN ('QUEUED', 'IN_PROGRESS') ORDER BY seq`, id)
	return sqlstore.List(rows, err, scanJob, "list live jobs of schedule %s", id)
}

// FireSlot applies one evaluation of a schedule in one transaction.
func (s *Store) FireSlot(ctx context.Context, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	var res jobstore.SlotResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = sqlstore.FireSlot(ctx, scheduleTx{tx}, f)
		return err
	})
	return res, err
}

// scheduleTx is FireSlot's statements on PostgreSQL.
type scheduleTx struct{ tx pgx.Tx }

func (t scheduleTx) Lock(ctx context.Context, id string) (bool, time.Time, error) {
	var (
		paused   bool
		buffered *time.Time
	)
	err := t.tx.QueryRow(ctx, `SELECT paused, buffered_at FROM schedules WHERE id = $1 FOR UPDATE`, id).Scan(&paused, &buffered)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, time.Time{}, fmt.Errorf("fire schedule %s: %w", id, jobstore.ErrScheduleNotFound)
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("fire schedule %s: %w", id, err)
	}
	if buffered == nil {
		return paused, time.Time{}, nil
	}
	return paused, buffered.UTC(), nil
}

func (t scheduleTx) Live(ctx context.Context, id string) (int64, error) {
	return sqlstore.Int(t.tx.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE schedule_id = $1 AND status IN ('QUEUED', 'IN_PROGRESS')`, id),
		"count live jobs of schedule %s", id)
}

func (t scheduleTx) InsertSlot(ctx context.Context, sl jobstore.Slot) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO schedule_slots (schedule_id, scheduled_at, outcome, count, through, detail)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (schedule_id, scheduled_at) DO NOTHING`,
		sl.ScheduleID, sl.ScheduledAt, sl.Outcome, max(sl.Count, 1), nullTime(sl.Through), sl.Detail)
	if err != nil {
		return false, fmt.Errorf("record slot of schedule %s: %w", sl.ScheduleID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t scheduleTx) FireBuffered(ctx context.Context, id string, at time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE schedule_slots SET outcome = 'fired', detail = 'fired when the earlier slot''s jobs ended', recorded_at = clock_timestamp()
		WHERE schedule_id = $1 AND scheduled_at = $2 AND outcome = 'buffered'`, id, at)
	if err != nil {
		return false, fmt.Errorf("fire buffered slot of schedule %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t scheduleTx) SetBuffered(ctx context.Context, id string, at time.Time) error {
	if _, err := t.tx.Exec(ctx, `UPDATE schedules SET buffered_at = $2 WHERE id = $1`, id, nullTime(at)); err != nil {
		return fmt.Errorf("buffer slot of schedule %s: %w", id, err)
	}
	return nil
}

func (t scheduleTx) SetNext(ctx context.Context, id string, next time.Time) error {
	if _, err := t.tx.Exec(ctx, `UPDATE schedules
		SET next_at = CASE WHEN $2::timestamptz IS NULL THEN NULL ELSE GREATEST(next_at, $2) END, updated_at = clock_timestamp()
		WHERE id = $1`, id, nullTime(next)); err != nil {
		return fmt.Errorf("move schedule %s: %w", id, err)
	}
	return nil
}

func (t scheduleTx) InsertJobs(ctx context.Context, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	return insertJobs(ctx, t.tx, specs)
}
