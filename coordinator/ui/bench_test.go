package ui_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/protocol"
)

// The fleet and the job history of the benchmarks (docs/benchmarks.md,
// "Web dashboard"): 1,000 agents with 3 phones each, 100,000 jobs spread
// over them and over 4 projects, two in three with a screenshot (and each
// phone's newest one in phone_screens, as RegisterArtifact keeps it).
const (
	benchAgents = 1000
	benchPhones = 3
	benchJobs   = 100_000
)

type benchEnv struct {
	h     *ui.Handler
	token string
	loc   string
}

// seedPG and seedSQLite fill the jobs and artifacts tables directly, with
// the columns the store writes (ids, statuses, owners, phones, projects).
const seedPG = `
INSERT INTO jobs (id, status, task, project, worker_id, device_serial, lease_generation, attempts, submitted_by, completed_by, created_at, updated_at)
SELECT 'job-' || g,
       CASE WHEN g > $1 - $2 THEN 'IN_PROGRESS' WHEN g % 20 = 0 THEN 'FAILED' WHEN g % 20 = 1 THEN 'CANCELLED' ELSE 'SUCCEEDED' END,
       '{"steps":[{"op":"screenshot","name":"s.png"}]}'::jsonb,
       'p' || ((g / $2 / $3) % 4),
       'agent-' || lpad((g % $2)::text, 4, '0') || '/boot-1',
       'A' || lpad((g % $2)::text, 4, '0') || '-S' || ((g / $2) % $3),
       1, 1, 'alice', 'agent-' || lpad((g % $2)::text, 4, '0') || '/boot-1',
       now() - ($1 - g) * interval '1 second', now() - ($1 - g) * interval '1 second'
FROM generate_series(1, $1) g;
INSERT INTO artifacts (job_id, generation, owner, name, key, size, sha256, content_type)
SELECT id, 1, worker_id, 's.png', 'jobs/' || id || '/g1/s.png', 10000, 'x', 'image/png' FROM jobs WHERE seq % 3 <> 0;
INSERT INTO phone_screens (agent_id, serial, job_id, project, generation, name, content_type, created_at)
SELECT DISTINCT ON (split_part(j.worker_id, '/', 1), j.device_serial)
       split_part(j.worker_id, '/', 1), j.device_serial, j.id, j.project, a.generation, a.name, a.content_type, a.created_at
FROM artifacts a JOIN jobs j ON j.id = a.job_id
ORDER BY split_part(j.worker_id, '/', 1), j.device_serial, j.seq DESC;
ANALYZE`

const seedSQLite = `
WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < ?1)
INSERT INTO jobs (id, status, task, project, worker_id, device_serial, lease_generation, attempts, submitted_by, completed_by, created_at, updated_at)
SELECT 'job-' || g,
       CASE WHEN g > ?1 - ?2 THEN 'IN_PROGRESS' WHEN g % 20 = 0 THEN 'FAILED' WHEN g % 20 = 1 THEN 'CANCELLED' ELSE 'SUCCEEDED' END,
       '{"steps":[{"op":"screenshot","name":"s.png"}]}',
       'p' || ((g / ?2 / ?3) % 4),
       'agent-' || printf('%04d', g % ?2) || '/boot-1',
       'A' || printf('%04d', g % ?2) || '-S' || ((g / ?2) % ?3),
       1, 1, 'alice', 'agent-' || printf('%04d', g % ?2) || '/boot-1',
       strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (?1 - g) || ' seconds'),
       strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (?1 - g) || ' seconds')
FROM n;
INSERT INTO artifacts (job_id, generation, owner, name, key, size, sha256, content_type)
SELECT id, 1, worker_id, 's.png', 'jobs/' || id || '/g1/s.png', 10000, 'x', 'image/png' FROM jobs WHERE rowid % 3 <> 0;
INSERT OR REPLACE INTO phone_screens (agent_id, serial, job_id, project, generation, name, content_type, created_at)
SELECT substr(j.worker_id, 1, instr(j.worker_id, '/') - 1), j.device_serial, j.id, j.project, a.generation, a.name, a.content_type, a.created_at
FROM artifacts a JOIN jobs j ON j.id = a.job_id
ORDER BY j.rowid;
ANALYZE`

// benchSetup returns the dashboard of a store of kind holding the fleet
// and the jobs.
func benchSetup(b *testing.B, kind string) *benchEnv {
	ctx := context.Background()
	loc := location(b, kind)
	st := openStore(b, kind, loc)
	level, temp := 77, 31.5
	for a := range benchAgents {
		var devs []protocol.Device
		for p := range benchPhones {
			devs = append(devs, protocol.Device{Serial: fmt.Sprintf("A%04d-S%d", a, p), State: protocol.DeviceReady, Model: "Pixel 7",
				Tags:  []string{"lab", "row-" + fmt.Sprint(a%10)},
				Facts: &protocol.PhoneFacts{BatteryLevel: &level, BatteryTempC: &temp, AndroidVersion: "14", SDK: 34, ScreenWidth: 1080, ScreenHeight: 2400}})
		}
		if _, _, err := st.AgentHello(ctx, jobstore.AgentHello{AgentID: fmt.Sprintf("agent-%04d", a), BootID: "boot-1", Version: "1.0.0",
			Devices: devs, Slots: benchPhones, CoordinatorID: "c1"}); err != nil {
			b.Fatal(err)
		}
	}
	switch kind {
	case "sqlite":
		db, err := sql.Open("sqlite", loc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, seedSQLite, benchJobs, benchAgents, benchPhones); err != nil {
			b.Fatalf("seed: %v", err)
		}
		db.Close()
	default:
		conn, err := pgx.Connect(ctx, loc)
		if err != nil {
			b.Fatal(err)
		}
		// One statement per Exec: the extended protocol takes one.
		for i, q := range splitSQL(seedPG) {
			var args []any
			if i == 0 {
				args = []any{benchJobs, benchAgents, benchPhones}
			}
			if _, err := conn.Exec(ctx, q, args...); err != nil {
				b.Fatalf("seed: %v", err)
			}
		}
		conn.Close(ctx)
	}
	secret, hash, err := api.NewToken()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.CreateAPIToken(ctx, jobstore.APIToken{Name: "bench", Hash: hash, Projects: []string{"p0", "p1"}, Scopes: []string{"read", "operate", "admin"}}); err != nil {
		b.Fatal(err)
	}
	// A presigner that signs locally (its region is set): the thumbnails
	// are looked up as with storage configured.
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: "127.0.0.1:9", Region: "us-east-1", Bucket: "b", AccessKey: "k", SecretKey: "secretsecret"})
	if err != nil {
		b.Fatal(err)
	}
	h, err := ui.New(ui.Options{Store: st, Presigner: p, StorageOrigin: "http://127.0.0.1:9", OfflineAfter: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{h: h, token: secret, loc: loc}
}

// changeDevices rewrites every agent's stored phone list with a new model
// name (i-th version), as if every agent had just reported new facts.
func (e *benchEnv) changeDevices(b *testing.B, kind string, i int) {
	ctx := context.Background()
	from, to := fmt.Sprintf(`"model":"Pixel 7 r%d"`, i-1), fmt.Sprintf(`"model":"Pixel 7 r%d"`, i)
	if i == 0 {
		from = `"model":"Pixel 7"`
	}
	switch kind {
	case "sqlite":
		db, err := sql.Open("sqlite", e.loc)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `UPDATE agents SET devices = replace(devices, ?, ?)`, from, to); err != nil {
			b.Fatal(err)
		}
	default:
		conn, err := pgx.Connect(ctx, e.loc)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		// jsonb prints ": " between key and value.
		from, to = strings.Replace(from, ":", ": ", 1), strings.Replace(to, ":", ": ", 1)
		if _, err := conn.Exec(ctx, `UPDATE agents SET devices = replace(devices::text, $1, $2)::jsonb`, from, to); err != nil {
			b.Fatal(err)
		}
	}
}

func splitSQL(s string) []string {
	var out []string
	for _, q := range strings.Split(s, ";") {
		if q = strings.TrimSpace(q); q != "" {
			out = append(out, q)
		}
	}
	return out
}

// cursorAt is the job list's cursor after the job inserted seq-th.
func cursorAt(seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("u1:%d", seq)))
}

// benchPage renders path b.N times, each as a new request with the bearer
// token (authentication included), and reports the 99th percentile.
func benchPage(b *testing.B, e *benchEnv, path, want string) {
	benchPageAfter(b, e, path, want, nil)
}

// benchPageAfter is benchPage calling before (untimed) ahead of each
// render.
func benchPageAfter(b *testing.B, e *benchEnv, path, want string, before func(i int)) {
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if before != nil {
			b.StopTimer()
			before(i)
			b.StartTimer()
		}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		rec := httptest.NewRecorder()
		start := time.Now()
		e.h.ServeHTTP(rec, req)
		took = append(took, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		if want != "" && !strings.Contains(rec.Body.String(), want) {
			b.Fatalf("GET %s lacks %q", path, want)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	p99 := took[min(len(took)-1, len(took)*99/100)]
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// BenchmarkDashboard renders the fleet page (1,000 agents, 3,000 phones,
// their running jobs and last screenshots) and the job list over 100,000
// jobs: the first page, a status filter, an agent filter and a page deep
// in the history (docs/benchmarks.md, "Web dashboard"; goal ≤ 200 ms p99).
func BenchmarkDashboard(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			e := benchSetup(b, kind)
			b.Run("fleet", func(b *testing.B) { benchPage(b, e, "/ui/fleet", `data-phone="agent-0999/A0999-S2"`) })
			// Every agent's phones changed since the last render (new
			// facts in every heartbeat): no device list is decoded from
			// the memo.
			b.Run("fleet-changed", func(b *testing.B) {
				benchPageAfter(b, e, "/ui/fleet", `data-phone="agent-0999/A0999-S2"`, func(i int) { e.changeDevices(b, kind, i) })
				// The renders showed the changes.
				req := httptest.NewRequest(http.MethodGet, "/ui/fleet", nil)
				req.Header.Set("Authorization", "Bearer "+e.token)
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
				if want := fmt.Sprintf("Pixel 7 r%d", b.N-1); !strings.Contains(rec.Body.String(), want) {
					b.Fatalf("fleet page lacks the changed model %q", want)
				}
			})
			b.Run("jobs", func(b *testing.B) { benchPage(b, e, "/ui/jobs", `class="next"`) })
			b.Run("jobs-failed", func(b *testing.B) { benchPage(b, e, "/ui/jobs?status=FAILED", `class="next"`) })
			b.Run("jobs-agent", func(b *testing.B) { benchPage(b, e, "/ui/jobs?agent=agent-0041", `data-job=`) })
			b.Run("jobs-deep", func(b *testing.B) { benchPage(b, e, "/ui/jobs?cursor="+cursorAt(benchJobs/10), `data-job=`) })
		})
	}
}
