package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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
	COALESCE((SELECT json_group_array(json_object('id', j.id, 'status', j.status,
	              'phone', COALESCE(j.device_serial, json_extract(j.task, '$.device.serial'), ''),
	              'not_before_ms', CAST(round((julianday(j.not_before) - 2440587.5) * 86400000) AS INTEGER),
	              'granted_ms', (SELECT CAST(round((julianday(min(w.at)) - 2440587.5) * 86400000) AS INTEGER) FROM write_events w
	                             WHERE w.job_id = j.id AND w.verb IN ('claim', 'reassign') AND w.accepted)))
	          FROM jobs j WHERE j.schedule_id = s.schedule_id AND j.scheduled_at = s.scheduled_at), '[]')
	FROM schedule_slots s`

// queryRower is the reader pool or a transaction.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dbNow reads the database clock.
func dbNow(ctx context.Context, q queryRower) (time.Time, error) {
	var s string
	if err := q.QueryRowContext(ctx, `SELECT `+now).Scan(&s); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return parseTime(s)
}

// nullTime maps the zero time to SQL NULL, others to stored text.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// CreateSchedule stores a schedule with its first slot.
func (s *Store) CreateSchedule(ctx context.Context, sc jobstore.Schedule, limit int, first func(now time.Time) time.Time) (jobstore.Schedule, error) {
	var out jobstore.Schedule
	err := s.write(ctx, func(tx txn) error {
		n, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRowContext(ctx, `
			INSERT INTO schedules (id, project, spec, created_by, next_at)
			SELECT ?1, ?2, ?3, ?4, ?5
			WHERE ?6 <= 0 OR (SELECT count(*) FROM schedules WHERE project = ?2) < ?6
			RETURNING `+scheduleColumns, sc.ID, sc.Project, string(sc.Spec), sc.CreatedBy, nullTime(first(n)), limit))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("project %s: %w (%d)", sc.Project, jobstore.ErrScheduleLimit, limit)
		}
		return err
	})
	if err != nil {
		return jobstore.Schedule{}, fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (jobstore.Schedule, error) {
	sc, err := scanSchedule(s.rc.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
	return sqlstore.Found(sc, err, jobstore.ErrScheduleNotFound, "get schedule %s", id)
}

// Schedules lists schedules by id.
func (s *Store) Schedules(ctx context.Context, f jobstore.ScheduleFilter) ([]jobstore.Schedule, error) {
	q := `SELECT ` + scheduleColumns + ` FROM schedules`
	var args []any
	if f.Projects != nil {
		q += ` WHERE 0`
		if len(f.Projects) > 0 {
			q = `SELECT ` + scheduleColumns + ` FROM schedules WHERE project IN (?` + strings.Repeat(`, ?`, len(f.Projects)-1) + `)`
		}
		for _, p := range f.Projects {
			args = append(args, p)
		}
	}
	rows, err := s.query(ctx, q+` ORDER BY id`, args...)
	return sqlstore.List(rows, err, scanSchedule, "list schedules")
}

// DeleteSchedule removes a schedule and its slots.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, jobstore.ErrScheduleNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}

// PauseSchedule pauses or resumes a schedule.
func (s *Store) PauseSchedule(ctx context.Context, id string, paused bool, next func(now time.Time) time.Time) (jobstore.Schedule, error) {
	var out jobstore.Schedule
	err := s.write(ctx, func(tx txn) error {
		n, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		q := `UPDATE schedules SET paused = 1, updated_at = ` + now + ` WHERE id = ? RETURNING ` + scheduleColumns
		args := []any{id}
		if !paused {
			q = `UPDATE schedules SET paused = 0, next_at = ?, updated_at = ` + now + ` WHERE id = ? RETURNING ` + scheduleColumns
			args = []any{nullTime(next(n)), id}
		}
		sc, err := scanSchedule(tx.QueryRowContext(ctx, q, args...))
		out, err = sqlstore.Found(sc, err, jobstore.ErrScheduleNotFound, "pause schedule %s", id)
		return err
	})
	return out, err
}

// DueSchedules returns the database clock and the schedules due at it.
func (s *Store) DueSchedules(ctx context.Context, limit int) (time.Time, []jobstore.Schedule, error) {
	n, err := dbNow(ctx, s.rc)
	if err != nil {
		return time.Time{}, nil, err
	}
	rows, err := s.query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE NOT paused AND (next_at <= ? OR buffered_at IS NOT NULL)
		ORDER BY next_at IS NULL, next_at, id LIMIT ?`, formatTime(n), max(limit, 1))
	due, err := sqlstore.List(rows, err, scanSchedule, "list due schedules")
	return n, due, err
}

// ScheduleSlots lists a schedule's slots, newest first.
func (s *Store) ScheduleSlots(ctx context.Context, id string, limit int) ([]jobstore.Slot, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.query(ctx, slotSelect+` WHERE s.schedule_id = ? ORDER BY s.scheduled_at DESC LIMIT ?`, id, limit)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.Slot, error) { return sqlstore.ScanSlot(r, times) }, "list slots of schedule %s", id)
}

// LiveScheduleJobs lists the queued and running jobs of a schedule.
func (s *Store) LiveScheduleJobs(ctx context.Context, id string) ([]jobstore.Job, error) {
	rows, err := s.query(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE schedule_id = ? AND status IN ('QUEUED', 'IN_PROGRESS') ORDER BY rowid`, id)
	return sqlstore.List(rows, err, scanJob, "list live jobs of schedule %s", id)
}

// FireSlot applies one evaluation of a schedule in one transaction: a
// BEGIN IMMEDIATE one, so no other writer runs between its statements.
func (s *Store) FireSlot(ctx context.Context, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	var res jobstore.SlotResult
	err := s.write(ctx, func(tx txn) error {
		var err error
		res, err = sqlstore.FireSlot(ctx, scheduleTx{tx}, f)
		return err
	})
	return res, err
}

// scheduleTx is FireSlot's statements on SQLite.
type scheduleTx struct{ tx txn }

func (t scheduleTx) Lock(ctx context.Context, id string) (bool, time.Time, error) {
	var (
		paused   bool
		buffered sql.NullString
	)
	// The transaction holds the database's write lock already.
	err := t.tx.QueryRowContext(ctx, `SELECT paused, buffered_at FROM schedules WHERE id = ?`, id).Scan(&paused, &buffered)
	if errors.Is(err, sql.ErrNoRows) {
		return false, time.Time{}, fmt.Errorf("fire schedule %s: %w", id, jobstore.ErrScheduleNotFound)
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("fire schedule %s: %w", id, err)
	}
	if !buffered.Valid {
		return paused, time.Time{}, nil
	}
	at, err := parseTime(buffered.String)
	return paused, at, err
}

func (t scheduleTx) Live(ctx context.Context, id string) (int64, error) {
	return sqlstore.Int(t.tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE schedule_id = ? AND status IN ('QUEUED', 'IN_PROGRESS')`, id),
		"count live jobs of schedule %s", id)
}

func (t scheduleTx) InsertSlot(ctx context.Context, sl jobstore.Slot) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO schedule_slots (schedule_id, scheduled_at, outcome, count, through, detail)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, scheduled_at) DO NOTHING`,
		sl.ScheduleID, formatTime(sl.ScheduledAt), sl.Outcome, max(sl.Count, 1), nullTime(sl.Through), sl.Detail)
	if err != nil {
		return false, fmt.Errorf("record slot of schedule %s: %w", sl.ScheduleID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t scheduleTx) FireBuffered(ctx context.Context, id string, at time.Time) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE schedule_slots SET outcome = 'fired', detail = 'fired when the earlier slot''s jobs ended', recorded_at = `+now+`
		WHERE schedule_id = ? AND scheduled_at = ? AND outcome = 'buffered'`, id, formatTime(at))
	if err != nil {
		return false, fmt.Errorf("fire buffered slot of schedule %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t scheduleTx) SetBuffered(ctx context.Context, id string, at time.Time) error {
	if _, err := t.tx.ExecContext(ctx, `UPDATE schedules SET buffered_at = ? WHERE id = ?`, nullTime(at), id); err != nil {
		return fmt.Errorf("buffer slot of schedule %s: %w", id, err)
	}
	return nil
}

func (t scheduleTx) SetNext(ctx context.Context, id string, next time.Time) error {
	// Stored times are fixed-width text, so max() orders them as times.
	if _, err := t.tx.ExecContext(ctx, `UPDATE schedules
		SET next_at = CASE WHEN ?1 IS NULL THEN NULL ELSE max(COALESCE(next_at, ?1), ?1) END, updated_at = `+now+`
		WHERE id = ?2`, nullTime(next), id); err != nil {
		return fmt.Errorf("move schedule %s: %w", id, err)
	}
	return nil
}

func (t scheduleTx) InsertJobs(ctx context.Context, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	return insertJobs(ctx, t.tx, specs)
}
