package sqlstore

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// Row is one result row as both drivers hand it out: pgx.Row and pgx.Rows
// on PostgreSQL, *sql.Row and *sql.Rows on SQLite. The scanners below read
// the columns of both stores into the same destinations: nullable text as
// *string, JSON documents as []byte, and timestamps as the dialect's T,
// decoded by its Times.
type Row interface{ Scan(dest ...any) error }

// Times is a dialect's time codec: it decodes what a timestamp column scans
// into (T: time.Time from PostgreSQL's timestamptz, the text SQLite keeps)
// as a UTC time.
type Times[T any] func(T) (time.Time, error)

// Null decodes a nullable timestamp: the zero time for NULL.
func (d Times[T]) Null(v *T) (time.Time, error) {
	if v == nil {
		return time.Time{}, nil
	}
	return d(*v)
}

// deref is the text of a nullable column, "" for NULL.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// JobColumns are the columns ScanJob reads, in its order.
const JobColumns = `id, status, task, lease_generation, worker_id, lease_expires_at,
	result, completed_by, fail_reason, created_at, updated_at, device_serial,
	project, priority, not_before, max_attempts, attempts, deadline_at, submitted_by,
	attempt_ends, schedule_id, scheduled_at`

// ScanJob reads a job (JobColumns).
func ScanJob[T any](row Row, times Times[T]) (jobstore.Job, error) {
	var (
		j                          jobstore.Job
		task, result, ends         []byte
		worker, by, reason, device *string
		schedule                   *string
		expires, notBefore, dead   *T
		scheduledAt                *T
		createdAt, updatedAt       T
	)
	if err := row.Scan(&j.ID, &j.Status, &task, &j.Generation, &worker, &expires,
		&result, &by, &reason, &createdAt, &updatedAt, &device,
		&j.Project, &j.Priority, &notBefore, &j.MaxAttempts, &j.Attempts, &dead, &j.SubmittedBy,
		&ends, &schedule, &scheduledAt); err != nil {
		return jobstore.Job{}, err
	}
	if err := json.Unmarshal(ends, &j.AttemptEnds); err != nil {
		return jobstore.Job{}, fmt.Errorf("decode attempt ends: %w", err)
	}
	if err := json.Unmarshal(task, &j.Task); err != nil {
		return jobstore.Job{}, fmt.Errorf("decode task: %w", err)
	}
	if len(result) > 0 {
		j.Result = json.RawMessage(result)
	}
	j.WorkerID, j.CompletedBy, j.FailReason, j.Device = deref(worker), deref(by), deref(reason), deref(device)
	j.ScheduleID = deref(schedule)
	var err error
	for _, t := range []struct {
		to   *time.Time
		from *T
	}{{&j.LeaseExpiresAt, expires}, {&j.NotBefore, notBefore}, {&j.DeadlineAt, dead}, {&j.ScheduledAt, scheduledAt}, {&j.CreatedAt, &createdAt}, {&j.UpdatedAt, &updatedAt}} {
		if *t.to, err = times.Null(t.from); err != nil {
			return jobstore.Job{}, err
		}
	}
	return j, nil
}

// AgentColumns are the columns ScanAgent reads, in its order, but the last:
// the seconds since last_seen on the database clock, which each dialect
// writes its own way (seenAgo).
const AgentColumns = `agent_id, boot_id, version, devices, capabilities, slots, draining, agent_draining, settings,
	coordinator_id, connected_at, last_seen, `

// agentDevicesColumn is the index of the devices column in AgentColumns.
const agentDevicesColumn = 3

// ScanAgent reads an agent (AgentColumns and the seconds since last seen).
func ScanAgent[T any](row Row, times Times[T]) (jobstore.Agent, error) {
	var (
		a                       jobstore.Agent
		devices, caps, settings []byte
		connectedAt, lastSeen   *T
		seenAgo                 *float64
	)
	if err := row.Scan(&a.ID, &a.BootID, &a.Version, &devices, &caps, &a.Slots, &a.Draining, &a.AgentDraining, &settings,
		&a.CoordinatorID, &connectedAt, &lastSeen, &seenAgo); err != nil {
		return jobstore.Agent{}, err
	}
	if err := json.Unmarshal(devices, &a.Devices); err != nil {
		return jobstore.Agent{}, fmt.Errorf("decode devices: %w", err)
	}
	if err := json.Unmarshal(caps, &a.Capabilities); err != nil {
		return jobstore.Agent{}, fmt.Errorf("decode capabilities: %w", err)
	}
	if err := json.Unmarshal(settings, &a.Settings); err != nil {
		return jobstore.Agent{}, fmt.Errorf("decode settings: %w", err)
	}
	var err error
	if a.ConnectedAt, err = times.Null(connectedAt); err != nil {
		return jobstore.Agent{}, err
	}
	if a.LastSeen, err = times.Null(lastSeen); err != nil {
		return jobstore.Agent{}, err
	}
	if seenAgo != nil {
		a.SeenAgo = max(0, time.Duration(*seenAgo*float64(time.Second)))
	}
	return a, nil
}

// fleetRow scans an agent row (AgentColumns) for FleetAgents: it keeps the
// devices' JSON for itself and hands the scanner a JSON null in its place,
// so ScanAgent decodes no device list.
type fleetRow struct {
	Row     Row
	Devices []byte // the devices column as stored
}

// Scan scans the row.
func (d *fleetRow) Scan(dest ...any) error {
	target, ok := dest[agentDevicesColumn].(*[]byte)
	if !ok {
		return fmt.Errorf("scan agent: devices into %T", dest[agentDevicesColumn])
	}
	dest[agentDevicesColumn] = &d.Devices
	if err := d.Row.Scan(dest...); err != nil {
		return err
	}
	*target = []byte("null")
	return nil
}

// ScanFleetAgent reads an agent for FleetAgents (jobstore.FleetAgent): its
// device list left as stored.
func ScanFleetAgent[T any](row Row, times Times[T]) (jobstore.FleetAgent, error) {
	fr := &fleetRow{Row: row}
	a, err := ScanAgent(fr, times)
	if err != nil {
		return jobstore.FleetAgent{}, err
	}
	a.Devices = nil
	return jobstore.FleetAgent{Agent: a, DevicesJSON: fr.Devices}, nil
}

// Found is the end of a one-row read: v when err is nil, otherwise the zero
// value and RowErr(err, notFound, format, args...).
func Found[V any](v V, err, notFound error, format string, args ...any) (V, error) {
	if err != nil {
		var zero V
		return zero, RowErr(err, notFound, format, args...)
	}
	return v, nil
}

// RowErr is the error of a one-row read that failed: err wrapped as
// fmt.Errorf(format+": %w", args..., err), with notFound in place of the
// driver's no-rows error (database/sql's sql.ErrNoRows, which pgx's
// ErrNoRows wraps).
func RowErr(err, notFound error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		err = notFound
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// TokenColumns are the columns ScanToken reads, in its order.
const TokenColumns = `id, name, hash, projects, scopes, created_at, revoked_at, last_used_at`

// TokenUseTimeout bounds a token's look-up and the record of its use
// (last_used_at), which run detached from the request that presented the
// token so that a client going away does not cancel them. A look-up still
// waiting on a locked row after this long fails the request (500).
const TokenUseTimeout = 15 * time.Second

// ScanToken reads an API token (TokenColumns).
func ScanToken[T any](row Row, times Times[T]) (jobstore.APIToken, error) {
	var (
		t                 jobstore.APIToken
		hash              []byte
		projects, scopes  string
		created           T
		revoked, lastUsed *T
	)
	if err := row.Scan(&t.ID, &t.Name, &hash, &projects, &scopes, &created, &revoked, &lastUsed); err != nil {
		return jobstore.APIToken{}, err
	}
	copy(t.Hash[:], hash)
	t.Projects = splitList(projects)
	t.Scopes = splitList(scopes)
	var err error
	if t.CreatedAt, err = times(created); err != nil {
		return jobstore.APIToken{}, err
	}
	if t.RevokedAt, err = times.Null(revoked); err != nil {
		return jobstore.APIToken{}, err
	}
	if t.LastUsedAt, err = times.Null(lastUsed); err != nil {
		return jobstore.APIToken{}, err
	}
	return t, nil
}

// splitList decodes a comma-separated list ("" is none).
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ScanEffect reads an effect row: key, kind, state, job_id, step, op,
// owner, generation, attempt, receipt, evidence, payload, attempts,
// last_error, reservations, resolution, note, created_at, updated_at,
// done_at.
func ScanEffect[T any](row Row, times Times[T]) (jobstore.EffectRecord, error) {
	var (
		r                          jobstore.EffectRecord
		receipt, evidence, payload []byte
		createdAt, updatedAt       T
		doneAt                     *T
	)
	if err := row.Scan(&r.Key, &r.Kind, &r.State, &r.JobID, &r.Step, &r.Op, &r.Owner, &r.Generation, &r.Attempt, &receipt, &evidence,
		&payload, &r.Attempts, &r.LastError, &r.Reservations, &r.Resolution, &r.Note, &createdAt, &updatedAt, &doneAt); err != nil {
		return jobstore.EffectRecord{}, err
	}
	if len(receipt) > 0 {
		r.Receipt = json.RawMessage(receipt)
	}
	if len(payload) > 0 {
		r.Payload = json.RawMessage(payload)
	}
	var err error
	if r.Evidence, err = DecodeEvidence(evidence); err != nil {
		return jobstore.EffectRecord{}, err
	}
	if r.CreatedAt, err = times(createdAt); err != nil {
		return jobstore.EffectRecord{}, err
	}
	if r.UpdatedAt, err = times(updatedAt); err != nil {
		return jobstore.EffectRecord{}, err
	}
	if r.DoneAt, err = times.Null(doneAt); err != nil {
		return jobstore.EffectRecord{}, err
	}
	return r, nil
}

// Rows is a result set as both drivers hand it out (pgx.Rows, *sql.Rows).
// Collect reads it; the caller closes it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Collect reads every row of rows with scan.
func Collect[V any](rows Rows, scan func(Row) (V, error)) ([]V, error) {
	var out []V
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// More is row with more destinations after the ones its scanner names:
// Scan(dest...) scans into dest and then more.
func More(row Row, more ...any) Row { return moreRow{row, more} }

type moreRow struct {
	row  Row
	more []any
}

func (m moreRow) Scan(dest ...any) error { return m.row.Scan(append(dest, m.more...)...) }

// ScanLease reads the dest columns and then generation, lease expiry, task
// and deadline of a job just granted to owner.
func ScanLease[T any](row Row, times Times[T], jobID, owner string, dest ...any) (jobstore.Lease, error) {
	var (
		l        jobstore.Lease
		expires  T
		deadline *T
		task     []byte
	)
	if err := row.Scan(append(dest, &l.Token.Generation, &expires, &task, &deadline)...); err != nil {
		return jobstore.Lease{}, err
	}
	var err error
	if l.ExpiresAt, err = times(expires); err != nil {
		return jobstore.Lease{}, err
	}
	if l.DeadlineAt, err = times.Null(deadline); err != nil {
		return jobstore.Lease{}, err
	}
	if err := json.Unmarshal(task, &l.Task); err != nil {
		return jobstore.Lease{}, fmt.Errorf("decode task: %w", err)
	}
	l.Token.JobID = jobID
	l.Token.Owner = owner
	return l, nil
}

// ScanWriteEvent reads a write attempt: id, job_id, verb, owner,
// generation, accepted, at, detail, class, cause.
func ScanWriteEvent[T any](row Row, times Times[T]) (jobstore.WriteEvent, error) {
	var (
		e  jobstore.WriteEvent
		at T
	)
	if err := row.Scan(&e.ID, &e.JobID, &e.Verb, &e.Owner, &e.Generation, &e.Accepted, &at, &e.Detail, &e.Class, &e.Cause); err != nil {
		return jobstore.WriteEvent{}, err
	}
	var err error
	if e.At, err = times(at); err != nil {
		return jobstore.WriteEvent{}, err
	}
	return e, nil
}

// ScanArtifact reads an artifact record: job_id, generation, owner, name,
// key, size, sha256, content_type, etag, created_at.
func ScanArtifact[T any](row Row, times Times[T]) (jobstore.ArtifactRecord, error) {
	var (
		a  jobstore.ArtifactRecord
		at T
	)
	if err := row.Scan(&a.JobID, &a.Generation, &a.Owner, &a.Name, &a.Key, &a.Size, &a.SHA256, &a.ContentType, &a.ETag, &at); err != nil {
		return jobstore.ArtifactRecord{}, err
	}
	var err error
	if a.CreatedAt, err = times(at); err != nil {
		return jobstore.ArtifactRecord{}, err
	}
	return a, nil
}

// ScanUIAction reads a dashboard action: id, token_name, action, target,
// job_id, detail, at.
func ScanUIAction[T any](row Row, times Times[T]) (jobstore.UIAction, error) {
	var (
		a  jobstore.UIAction
		at T
	)
	if err := row.Scan(&a.ID, &a.TokenName, &a.Action, &a.Target, &a.JobID, &a.Detail, &at); err != nil {
		return jobstore.UIAction{}, err
	}
	var err error
	if a.At, err = times(at); err != nil {
		return jobstore.UIAction{}, err
	}
	return a, nil
}

// ScanPhoneScreen reads a phone's newest screenshot: agent_id, serial,
// job_id, project, generation, name, content_type, created_at of
// phone_screens.
func ScanPhoneScreen[T any](row Row, times Times[T]) (jobstore.PhoneScreen, error) {
	var (
		x  jobstore.PhoneScreen
		at T
	)
	if err := row.Scan(&x.AgentID, &x.Serial, &x.JobID, &x.Project, &x.Generation, &x.Name, &x.ContentType, &at); err != nil {
		return jobstore.PhoneScreen{}, err
	}
	var err error
	if x.At, err = times(at); err != nil {
		return jobstore.PhoneScreen{}, err
	}
	return x, nil
}

// ScanWriteCount reads a WriteCount: verb, accepted, rejected.
func ScanWriteCount(row Row) (WriteCount, error) {
	var c WriteCount
	err := row.Scan(&c.Verb, &c.Accepted, &c.Rejected)
	return c, err
}

// ScanRunningJob reads a job in progress: id, project, worker_id,
// device_serial (which the query reads as "" when NULL).
func ScanRunningJob(row Row) (jobstore.RunningJob, error) {
	var j jobstore.RunningJob
	err := row.Scan(&j.ID, &j.Project, &j.WorkerID, &j.Device)
	return j, err
}

// ScanIdempotent reads the stored submit of tokenID under key: request_hash,
// reply, created_at.
func ScanIdempotent[T any](row Row, times Times[T], tokenID int64, key string) (jobstore.Idempotent, error) {
	var (
		rec     = jobstore.Idempotent{TokenID: tokenID, Key: key}
		reply   []byte
		created T
	)
	if err := row.Scan(&rec.RequestHash, &reply, &created); err != nil {
		return jobstore.Idempotent{}, err
	}
	rec.Reply = json.RawMessage(reply)
	var err error
	if rec.CreatedAt, err = times(created); err != nil {
		return jobstore.Idempotent{}, err
	}
	return rec, nil
}

// DenialColumns are the columns ScanDenial reads, in its order.
const DenialColumns = `id, token_name, method, route, job_id, project, kind, window_start, count, at`

// ScanDenial reads a row of refused API requests (DenialColumns).
func ScanDenial[T any](row Row, times Times[T]) (jobstore.APIDenial, error) {
	var (
		d          jobstore.APIDenial
		window, at T
	)
	if err := row.Scan(&d.ID, &d.TokenName, &d.Method, &d.Route, &d.JobID, &d.Project, &d.Kind, &window, &d.Count, &at); err != nil {
		return jobstore.APIDenial{}, err
	}
	var err error
	if d.Window, err = times(window); err != nil {
		return jobstore.APIDenial{}, err
	}
	if d.At, err = times(at); err != nil {
		return jobstore.APIDenial{}, err
	}
	return d, nil
}

// RefusalColumns are the columns ScanRefusal reads, in its order.
const RefusalColumns = `id, agent_id, verb, window_start, count, job_id, owner, generation, detail, at`

// ScanRefusal reads a row of refused agent requests (RefusalColumns).
func ScanRefusal[T any](row Row, times Times[T]) (jobstore.AgentRefusal, error) {
	var (
		r          jobstore.AgentRefusal
		window, at T
	)
	if err := row.Scan(&r.ID, &r.AgentID, &r.Verb, &window, &r.Count, &r.JobID, &r.Owner, &r.Generation, &r.Detail, &at); err != nil {
		return jobstore.AgentRefusal{}, err
	}
	var err error
	if r.Window, err = times(window); err != nil {
		return jobstore.AgentRefusal{}, err
	}
	if r.At, err = times(at); err != nil {
		return jobstore.AgentRefusal{}, err
	}
	return r, nil
}

// JobPage reads a page of at most limit jobs from rows of JobColumns and
// then the job's cursor, newest first: Next is the cursor of the page's
// last job when rows hold one more job than limit.
func JobPage[T any](rows Rows, times Times[T], limit int) (jobstore.JobPage, error) {
	page := jobstore.JobPage{Jobs: []jobstore.Job{}}
	var last int64
	for rows.Next() {
		var seq int64
		j, err := ScanJob(More(rows, &seq), times)
		if err != nil {
			return jobstore.JobPage{}, err
		}
		if len(page.Jobs) == limit {
			page.Next = last
			break
		}
		page.Jobs = append(page.Jobs, j)
		last = seq
	}
	if err := rows.Err(); err != nil {
		return jobstore.JobPage{}, err
	}
	return page, nil
}

// ScanEvent reads a job event: id, job_id, verb, owner, generation,
// accepted, at, detail of write_events, then whether the job is found, its
// project, status, generation, phone and fail reason, the artifact's size
// and whether the attempt ended (jobstore.RawEvent).
func ScanEvent[T any](row Row, times Times[T]) (jobstore.Event, error) {
	var (
		e  jobstore.RawEvent
		at T
	)
	if err := row.Scan(&e.ID, &e.JobID, &e.Verb, &e.Owner, &e.Generation, &e.Accepted, &at, &e.Detail,
		&e.JobFound, &e.Project, &e.JobStatus, &e.JobGen, &e.JobPhone, &e.FailReason, &e.ArtSize, &e.Ended); err != nil {
		return jobstore.Event{}, err
	}
	var err error
	if e.At, err = times(at); err != nil {
		return jobstore.Event{}, err
	}
	return jobstore.NewEvent(e), nil
}

// ScanProjectJobCount reads a project's count of jobs in one status:
// project, status, count.
func ScanProjectJobCount(row Row) (jobstore.ProjectJobCount, error) {
	var c jobstore.ProjectJobCount
	err := row.Scan(&c.Project, &c.Status, &c.N)
	return c, err
}

// OwnerCounts reads rows of worker_id and a count into a map by owner,
// leaving out the NULL owner.
func OwnerCounts(rows Rows) (map[string]int, error) {
	out := map[string]int{}
	for rows.Next() {
		var (
			owner *string
			n     int64
		)
		if err := rows.Scan(&owner, &n); err != nil {
			return nil, err
		}
		if owner != nil {
			out[*owner] = int(n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Counts reads rows of a text key and a count into a map.
func Counts(rows Rows) (map[string]int64, error) {
	out := map[string]int64{}
	for rows.Next() {
		var (
			k string
			n int64
		)
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ResultSet is a result set that its reader closes: pgx.Rows, or *sql.Rows
// behind a store's adapter.
type ResultSet interface {
	Rows
	Close()
}

// Read is the end of a read of many rows: the rows of a query that returned
// err, read with read and closed; a failure wrapped as
// fmt.Errorf(format+": %w", args..., err).
func Read[V any](rows ResultSet, err error, read func(Rows) (V, error), format string, args ...any) (V, error) {
	if err == nil {
		defer rows.Close()
		var v V
		if v, err = read(rows); err == nil {
			return v, nil
		}
	}
	var zero V
	return zero, fmt.Errorf(format+": %w", append(args, err)...)
}

// List is Read of every row with scan (Collect).
func List[V any](rows ResultSet, err error, scan func(Row) (V, error), format string, args ...any) ([]V, error) {
	return Read(rows, err, func(r Rows) ([]V, error) { return Collect(r, scan) }, format, args...)
}

// Int reads a row of one integer (a count, an id): a failure wrapped as
// fmt.Errorf(format+": %w", args..., err).
func Int(row Row, format string, args ...any) (int64, error) {
	var n int64
	if err := row.Scan(&n); err != nil {
		return 0, fmt.Errorf(format+": %w", append(args, err)...)
	}
	return n, nil
}

// APKColumns are the columns ScanAPK reads, in its order.
const APKColumns = `sha256, size, package, version_code, version_name, added_at, added_by`

// ScanAPK reads a stored APK (APKColumns).
func ScanAPK[T any](row Row, times Times[T]) (jobstore.APKRecord, error) {
	var (
		a     jobstore.APKRecord
		added T
	)
	if err := row.Scan(&a.SHA256, &a.Size, &a.Package, &a.VersionCode, &a.VersionName, &added, &a.AddedBy); err != nil {
		return jobstore.APKRecord{}, err
	}
	var err error
	if a.AddedAt, err = times(added); err != nil {
		return jobstore.APKRecord{}, err
	}
	return a, nil
}
