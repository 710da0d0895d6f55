package storetest

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// atSchema creates a fresh database with the migrations up to version
// applied and recorded, and returns it with a function that runs a
// statement on it (failing the test on error).
func atSchema(t *testing.T, o Opener, migrations fs.FS, version int64) (loc string, exec func(q string)) {
	t.Helper()
	loc = o.Fresh(t)
	all, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	exec = func(q string) {
		t.Helper()
		if err := o.Exec(t.Context(), loc, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version bigint PRIMARY KEY, name text NOT NULL, applied_at text)`)
	for _, m := range all {
		if m.Version > version {
			break
		}
		exec(m.SQL)
		exec(fmt.Sprintf(`INSERT INTO schema_migrations (version, name) VALUES (%d, '%s')`, m.Version, m.Name))
	}
	return loc, exec
}

// RunMigrateEndStates checks that the migrations carry the jobs of a
// database at schema 3 over to the end states and attempts of schema 4 and
// later: a cancelled job (FAILED with an accepted cancel) becomes
// CANCELLED, one that waits on an effect decision (FAILED, reason
// "needs_decision...") NEEDS_DECISION, a failed one stays FAILED, and a
// queued job whose grants exceed the default attempt limit can still be
// granted. migrations holds the store's migration files (migrations/*.sql).
func RunMigrateEndStates(t *testing.T, o Opener, migrations fs.FS) {
	ctx := t.Context()
	loc, exec := atSchema(t, o, migrations, 3)
	task := `'{"device":{},"steps":[{"op":"screenshot","name":"s.png"}]}'`
	for _, q := range []string{
		`INSERT INTO jobs (id, status, task, lease_generation, worker_id, fail_reason) VALUES ('cancelled', 'FAILED', ` + task + `, 1, 'agent-a/boot-1', 'cancelled by operator')`,
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail) VALUES ('cancelled', 'cancel', 'agent-a/boot-1', 1, true, 'cancelled by operator')`,
		`INSERT INTO jobs (id, status, task, lease_generation, worker_id, fail_reason) VALUES ('decision', 'FAILED', ` + task + `, 2, 'agent-a/boot-1', '` + protocol.ReasonNeedsDecision + `: effect k is in doubt')`,
		`INSERT INTO jobs (id, status, task, lease_generation, worker_id, fail_reason) VALUES ('failed', 'FAILED', ` + task + `, 1, 'agent-a/boot-1', 'step 1 (screenshot): boom')`,
		// A refused cancel does not make a job cancelled.
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail) VALUES ('failed', 'cancel', '', 1, false, 'too late')`,
		`INSERT INTO jobs (id, status, task, lease_generation) VALUES ('requeued', 'QUEUED', ` + task + `, 4)`,
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail) VALUES ('requeued', 'reclaim', 'agent-a/boot-1', 3, true, 'lease expired')`,
	} {
		exec(q)
	}

	s, err := o.Open(ctx, loc)
	if err != nil {
		t.Fatalf("migrate from schema 3: %v", err)
	}
	defer s.Close()
	for id, want := range map[string]string{
		"cancelled": jobstore.StatusCancelled,
		"decision":  jobstore.StatusNeedsDecision,
		"failed":    jobstore.StatusFailed,
		"requeued":  jobstore.StatusQueued,
	} {
		j, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != want {
			t.Errorf("%s: status %s after the migration, want %s", id, j.Status, want)
		}
		if want == jobstore.StatusNeedsDecision && !jobstore.NeedsDecision(j) {
			t.Errorf("%s: NeedsDecision false", id)
		}
		if j.Attempts != int(j.Generation) || len(j.AttemptEnds) != 0 {
			t.Errorf("%s: attempts %d, ends %v, generation %d", id, j.Attempts, j.AttemptEnds, j.Generation)
		}
	}
	if j, _ := s.Get(ctx, "requeued"); j.MaxAttempts <= j.Attempts {
		t.Errorf("queued job with %d attempts has max_attempts %d: never granted again", j.Attempts, j.MaxAttempts)
	}
	evs, err := s.WriteEvents(ctx, "requeued")
	if err != nil || len(evs) != 1 || evs[0].Class != protocol.FailClassInfrastructure || evs[0].Cause != protocol.CauseLeaseExpired {
		t.Errorf("reclaim event after the migration: %+v, %v", evs, err)
	}
	if _, err := s.Cancel(ctx, "decision", "x"); err == nil || !strings.Contains(err.Error(), "finished") {
		t.Errorf("cancel of a NEEDS_DECISION job: %v", err)
	}
}

// RunMigrateDenials checks that the migration to counted API refusals
// carries the rows a database recorded one per request over to one row per
// token, kind and minute, counting them and keeping the last one's
// request.
func RunMigrateDenials(t *testing.T, o Opener, migrations fs.FS) {
	ctx := t.Context()
	loc, exec := atSchema(t, o, migrations, 9)
	for _, row := range []string{
		`'alice', 'GET', '/api/v1/jobs/j1', 'j1', 'b', '2026-01-01 10:00:01.000'`,
		`'alice', 'GET', '/api/v1/jobs/j2', 'j2', 'b', '2026-01-01 10:00:30.000'`,
		`'alice', 'GET', '/api/v1/jobs', '', 'nope', '2026-01-01 10:00:40.000'`,
		`'alice', 'POST', '/api/v1/jobs/j3/cancel', 'j3', 'c', '2026-01-01 10:00:59.000'`,
		`'alice', 'GET', '/api/v1/jobs/j4', 'j4', 'b', '2026-01-01 10:01:00.000'`,
		`'bob', 'GET', '/api/v1/jobs/j1', 'j1', 'b', '2026-01-01 10:00:02.000'`,
	} {
		exec(`INSERT INTO api_denials (token_name, method, route, job_id, project, at) VALUES (` + row + `)`)
	}
	s, err := o.Open(ctx, loc)
	if err != nil {
		t.Fatalf("migrate from schema 9: %v", err)
	}
	defer s.Close()
	ds, err := s.(jobstore.APIStore).APIDenials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%s %s %s ×%d last %s %s %s %s", d.TokenName, d.Kind, d.Window.UTC().Format("15:04:05"), d.Count,
			d.Method, d.Route, d.Project, d.At.UTC().Format("15:04:05")))
	}
	slices.Sort(got)
	want := []string{
		"alice job 10:00:00 ×3 last POST /api/v1/jobs/j3/cancel c 10:00:59",
		"alice job 10:01:00 ×1 last GET /api/v1/jobs/j4 b 10:01:00",
		"alice project 10:00:00 ×1 last GET /api/v1/jobs nope 10:00:40",
		"bob job 10:00:00 ×1 last GET /api/v1/jobs/j1 b 10:00:02",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("denials after the migration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// RunMigrateObservations checks the migration to stored observations: a
// database at schema 10 holding a running job is migrated, and the job's
// result is then accepted with its observations, which are listed; the
// jobs and write events it held are untouched.
func RunMigrateObservations(t *testing.T, o Opener, migrations fs.FS) {
	ctx := t.Context()
	loc, exec := atSchema(t, o, migrations, 10)
	task := `'{"device":{"serial":"R1"},"steps":[{"op":"screenshot","name":"s.png"}]}'`
	exec(`INSERT INTO jobs (id, status, task, project, lease_generation, worker_id, lease_expires_at, attempts)
		VALUES ('running', 'IN_PROGRESS', ` + task + `, 'lab', 1, 'agent-a/boot-1', '2999-01-01 00:00:00.000', 1)`)
	exec(`INSERT INTO write_events (job_id, verb, owner, generation, accepted) VALUES ('running', 'claim', 'agent-a/boot-1', 1, true)`)
	s, err := o.Open(ctx, loc)
	if err != nil {
		t.Fatalf("migrate from schema 10: %v", err)
	}
	defer s.Close()
	os, ok := s.(jobstore.ObservationStore)
	if !ok {
		t.Fatalf("%T is not a jobstore.ObservationStore", s)
	}
	tk := tok("running", "agent-a/boot-1", 1)
	if _, err := os.CommitObserved(ctx, tk, jobstore.ObservedResult{Result: result("ok"),
		Observations: []protocol.Observation{{Step: 1, Name: "price", Raw: "¥100", Value: "100", Parse: protocol.ParsePrice, Currency: "JPY"}}}); err != nil {
		t.Fatalf("commit with observations after the migration: %v", err)
	}
	rows, err := os.ListObservations(ctx, jobstore.ObservationFilter{Project: "lab", Limit: 10})
	if err != nil || len(rows) != 1 || rows[0].JobID != "running" || rows[0].PhoneSerial != "R1" || rows[0].Value != "100" {
		t.Fatalf("observations after the migration: %+v, %v", rows, err)
	}
	evs, err := s.WriteEvents(ctx, "running")
	if err != nil || len(evs) != 2 || evs[0].Verb != jobstore.VerbClaim || evs[1].Verb != jobstore.VerbResult || rows[0].WriteEvent != evs[1].ID {
		t.Fatalf("write events after the migration: %+v, %v", evs, err)
	}
}

// RunMigratePhonePlatform checks the migration that adds the phone's
// platform and OS version to observations: the rows of a database at
// schema 16 are android with no OS version once migrated, the rest of
// each row unchanged.
func RunMigratePhonePlatform(t *testing.T, o Opener, migrations fs.FS) {
	ctx := t.Context()
	loc, exec := atSchema(t, o, migrations, 16)
	task := `'{"device":{"serial":"R1"},"steps":[{"op":"screenshot","name":"s.png"}]}'`
	exec(`INSERT INTO jobs (id, status, task, project, lease_generation, worker_id, attempts)
		VALUES ('done', 'SUCCEEDED', ` + task + `, 'lab', 1, 'agent-a/boot-1', 1)`)
	exec(`INSERT INTO write_events (job_id, verb, owner, generation, accepted) VALUES ('done', 'result', 'agent-a/boot-1', 1, true)`)
	exec(`INSERT INTO observations (project, job_id, generation, owner, position, agent_id, phone_serial, phone_model, phone_sdk,
		step, name, raw, value, bounds, accepted_at, accepted, write_event_id)
		SELECT 'lab', 'done', 1, 'agent-a/boot-1', 0, 'agent-a', 'R1', 'SM-G991B', 33,
		       2, 'price', '¥100', '100', '[0,0,10,10]', '2026-12-01 10:00:00.000', true, max(id) FROM write_events`)
	s, err := o.Open(ctx, loc)
	if err != nil {
		t.Fatalf("migrate from schema 16: %v", err)
	}
	defer s.Close()
	rows, err := s.(jobstore.ObservationStore).ListObservations(ctx, jobstore.ObservationFilter{Project: "lab", Limit: 10})
	if err != nil || len(rows) != 1 {
		t.Fatalf("observations after the migration: %+v, %v", rows, err)
	}
	if r := rows[0]; r.PhonePlatform != protocol.PlatformAndroid || r.PhoneOSVersion != "" || r.PhoneSerial != "R1" ||
		r.PhoneModel != "SM-G991B" || r.PhoneSDK != 33 || r.Value != "100" || r.Bounds != [4]int{0, 0, 10, 10} {
		t.Fatalf("row after the migration: %+v", r)
	}
}
