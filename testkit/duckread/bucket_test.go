package duckread

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// moveToDays sets accepted_at of project lab's rows, in one statement:
// the rich job's and the stale job's to day1 at 09:00, the bulk jobs' to
// day2 at 09:00 (a millisecond apart in id order), as if the database
// clock had accepted them then.
func moveToDays(t *testing.T, dsn string, day1, day2 time.Time) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `UPDATE observations
		SET accepted_at = CASE WHEN job_id LIKE 'bulk-%' THEN $2::timestamptz ELSE $1::timestamptz END
		                  + interval '9 hours' + (id - (SELECT min(id) FROM observations)) * interval '1 millisecond'
		WHERE project = 'lab'`, day1, day2); err != nil {
		t.Fatal(err)
	}
}

// metric is the value of the sample series (a name with its labels, as
// /metrics writes it) on the coordinator's /metrics, 0 when absent.
func metric(t *testing.T, c *e2e.Coordinator, series string) int {
	t.Helper()
	resp, err := http.Get("http://" + c.MetricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestDuckDBReadsBucketExports: two real coordinators (edgecoord serve on
// one PostgreSQL, exports every second into one MinIO bucket) export a
// project whose observations were accepted over two past days: each day
// becomes one partition exports/lab/date=YYYY-MM-DD/ of Parquet files of
// at most exports.file_rows rows and a manifest, written once between
// them (one claim, attempt 1; over both coordinators
// observation_exports_total{outcome="written"} counts two and
// observation_export_rows_total their rows). DuckDB, reading the
// downloaded partition directory with hive partitioning, finds every
// accepted row of the store (the stale holder's refused row in neither
// partition), the columns of the API's Parquet export plus the
// partition's date, each row under the date of its accepted_at, and the
// values and provenance the store holds.
func TestDuckDBReadsBucketExports(t *testing.T) {
	env := e2e.NewEnv(t)
	extra := "exports: {every: 1s, after: 1h, file_rows: 5000}\n"
	ca := env.NewCoordinator(e2e.CoordinatorOptions{ID: "coord-a", Storage: true, Extra: extra})
	cb := env.NewCoordinator(e2e.CoordinatorOptions{ID: "coord-b", Storage: true, Extra: extra})
	if out, errOut, code := ca.CLI(t, "migrate"); code != 0 {
		t.Fatalf("edgecoord migrate: exit %d\n%s%s", code, out, errOut)
	}
	// The rows are in place, on their days, before either coordinator
	// starts: a pass sees a day whole or not at all.
	st := ca.Store()
	seed(t, st)
	day1 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	moveToDays(t, ca.DSN, day1, day2)
	stored := storedRows(t, st)
	var want1, want2 []jobstore.ObservationRow
	for _, o := range stored {
		switch {
		case !o.Accepted:
		case o.AcceptedAt.Before(day2):
			want1 = append(want1, o)
		default:
			want2 = append(want2, o)
		}
	}
	if len(want1) != 7 || len(want2) != 12000 {
		t.Fatalf("rows on the two days: %d and %d", len(want1), len(want2))
	}
	ca.Start()
	cb.Start()

	mio := env.MinIO()
	mc := mio.Client(t)
	for _, day := range []time.Time{day1, day2} {
		key := coordinator.ExportPartitionPrefix("lab", day) + coordinator.ManifestName
		testenv.Eventually(t, e2e.WaitTimeout, "the manifest "+key, func() bool {
			_, err := mc.StatObject(t.Context(), mio.Bucket, key, minio.StatObjectOptions{})
			return err == nil
		})
	}
	written := `observation_exports_total{outcome="` + coordinator.ExportWritten + `"}`
	testenv.Eventually(t, e2e.WaitTimeout, "two partitions counted written", func() bool {
		return metric(t, ca, written)+metric(t, cb, written) == 2
	})
	if n := metric(t, ca, "observation_export_rows_total") + metric(t, cb, "observation_export_rows_total"); n != len(want1)+len(want2) {
		t.Errorf("observation_export_rows_total: %d over both coordinators, want %d", n, len(want1)+len(want2))
	}
	parts, err := st.ExportPartitions(t.Context(), "lab", 10)
	if err != nil || len(parts) != 2 {
		t.Fatalf("partitions: %+v, %v", parts, err)
	}
	for _, p := range parts {
		if p.Attempt != 1 || p.Finished.IsZero() || (p.Owner != "coord-a" && p.Owner != "coord-b") {
			t.Errorf("partition %s: %+v; want finished by one coordinator at attempt 1", p.Day.Format("2006-01-02"), p)
		}
	}

	// Download the project's partitions as they are in the bucket.
	dir := t.TempDir()
	files := 0
	for o := range mc.ListObjects(t.Context(), mio.Bucket, minio.ListObjectsOptions{Prefix: coordinator.ExportPrefix + "lab/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := mc.FGetObject(t.Context(), mio.Bucket, o.Key, dst, minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(o.Key, ".parquet") {
			files++
		}
	}
	// 7 rows on day 1 in one file; 12,000 on day 2 in files of 5,000.
	if files != 4 {
		t.Errorf("%d Parquet files in the bucket, want 1 + 3", files)
	}
	for _, day := range []time.Time{day1, day2} {
		var m coordinator.ExportManifest
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(coordinator.ExportPartitionPrefix("lab", day)), coordinator.ManifestName))
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("manifest of %s: %v\n%s", day.Format("2006-01-02"), err, b)
		}
		if n := map[time.Time]int64{day1: 7, day2: 12000}[day]; m.Rows != n {
			t.Errorf("manifest of %s: %d rows, want %d", day.Format("2006-01-02"), m.Rows, n)
		}
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all := "read_parquet(" + quote(filepath.Join(dir, "exports", "lab", "*", "*.parquet")) + ", hive_partitioning = true)"
	wantTypes := append(append([][2]string{}, parquetTypes...), [2]string{"date", "DATE"})
	if got := describe(t, db, all); fmt.Sprint(got) != fmt.Sprint(wantTypes) {
		t.Errorf("columns of the partitions\n got  %v\n want %v", got, wantTypes)
	}
	for _, c := range []struct {
		day  time.Time
		want []jobstore.ObservationRow
	}{{day1, want1}, {day2, want2}} {
		from := "(SELECT * EXCLUDE (date) FROM " + all + " WHERE date = DATE " + quote(c.day.Format("2006-01-02")) + ")"
		compareRows(t, "partition "+c.day.Format("2006-01-02"), readRows(t, db, from, "to_json(bounds)::VARCHAR", "to_json(evidence)::VARCHAR"), c.want)
	}
	// Every row is under the date of its accepted_at.
	var misplaced int
	if err := db.QueryRow(`SELECT count(*) FROM ` + all + ` WHERE CAST(timezone('UTC', accepted_at) AS DATE) <> date`).Scan(&misplaced); err != nil || misplaced != 0 {
		t.Errorf("rows under another date than their accepted_at's: %d, %v", misplaced, err)
	}
	ca.MustCleanShutdown(t)
	cb.MustCleanShutdown(t)
}
