package coordinator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// exportSeed commits a result of n observations of project for a new job
// id (and, with stale, a stale holder's refused result of one more) and
// returns the job's token.
func exportSeed(t *testing.T, st sqlstore.Lab, project, id string, n int, stale bool) fencing.Token {
	t.Helper()
	ctx := t.Context()
	obsStore := st.(jobstore.ObservationStore)
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	if _, err := st.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: project}); err != nil {
		t.Fatal(err)
	}
	l, err := st.Claim(ctx, id, "pc-1/boot", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]protocol.Observation, n)
	for i := range obs {
		obs[i] = protocol.Observation{Step: i, Name: "price", Raw: fmt.Sprintf("¥%d", 1000+i), Value: fmt.Sprint(1000 + i),
			Parse: protocol.ParsePrice, Currency: "JPY", App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "5.2", VersionCode: 52}}
	}
	tok := l.Token
	if stale {
		if _, err := st.Reassign(ctx, id, "pc-2/boot", time.Hour); err != nil {
			t.Fatal(err)
		}
		late := []protocol.Observation{{Step: 0, Name: "price", Raw: "stale", Value: "stale", Parse: protocol.ParseText}}
		if _, err := obsStore.CommitObserved(ctx, tok, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: late}); err == nil {
			t.Fatal("a stale holder's result was accepted")
		}
		tok.Owner, tok.Generation = "pc-2/boot", tok.Generation+1
	}
	if _, err := obsStore.CommitObserved(ctx, tok, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: obs}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// setAccepted sets accepted_at of a job's rows to at, a millisecond apart
// in id order, as if the database clock had accepted them then: the one
// way a test gets rows on days of its choosing.
func setAccepted(t *testing.T, dsn, jobID string, at time.Time) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE observations
		SET accepted_at = $2::timestamptz + (id - (SELECT min(id) FROM observations WHERE job_id = $1)) * interval '1 millisecond'
		WHERE job_id = $1`, jobID, at); err != nil {
		t.Fatal(err)
	}
}

// objects lists the bucket's objects under prefix: key → ETag.
func objects(t *testing.T, c *minio.Client, bucket, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for o := range c.ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out[o.Key] = o.ETag
	}
	return out
}

func getObject(t *testing.T, c *minio.Client, bucket, key string) []byte {
	t.Helper()
	o, err := c.GetObject(t.Context(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

// checkPartition reads the manifest of a partition and every file it
// lists, and returns the ids of the rows in its files, in order: each
// file's size, sha256, row count and id range are the manifest's, and
// its rows are of the partition's day.
func checkPartition(t *testing.T, c *minio.Client, bucket, project string, day time.Time) (coordinator.ExportManifest, []int64) {
	t.Helper()
	prefix := coordinator.ExportPartitionPrefix(project, day)
	var m coordinator.ExportManifest
	if err := json.Unmarshal(getObject(t, c, bucket, prefix+coordinator.ManifestName), &m); err != nil {
		t.Fatalf("manifest of %s: %v", prefix, err)
	}
	if m.Format != coordinator.ManifestFormat || m.SchemaVersion != dataset.SchemaVersion || m.Project != project ||
		m.Date != day.Format("2006-01-02") || !m.AcceptedFrom.Equal(day) || !m.AcceptedUntil.Equal(day.Add(24*time.Hour)) {
		t.Fatalf("manifest of %s: %+v", prefix, m)
	}
	var ids []int64
	for i, f := range m.Files {
		if f.Key != fmt.Sprintf("%spart-%05d.parquet", prefix, i) {
			t.Fatalf("file %d of %s is %s", i, prefix, f.Key)
		}
		b := getObject(t, c, bucket, f.Key)
		sum := sha256.Sum256(b)
		if int64(len(b)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Fatalf("%s: %d bytes of sha256 %x; the manifest says %d bytes of %s", f.Key, len(b), sum, f.Bytes, f.SHA256)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("open %s: %v", f.Key, err)
		}
		rows := make([]dataset.ParquetRow, pf.NumRows())
		r := parquet.NewGenericReader[dataset.ParquetRow](pf)
		if n, err := r.Read(rows); int64(n) != f.Rows || (err != nil && err != io.EOF) {
			t.Fatalf("%s: read %d rows (%v); the manifest says %d", f.Key, n, err, f.Rows)
		}
		_ = r.Close()
		for _, row := range rows {
			if !row.Accepted || row.Project != project || row.AcceptedAt.Before(day) || !row.AcceptedAt.Before(day.Add(24*time.Hour)) {
				t.Fatalf("%s holds a row of another partition: %+v", f.Key, row)
			}
			ids = append(ids, row.ID)
		}
		if rows[0].ID != f.FirstID || rows[len(rows)-1].ID != f.LastID {
			t.Fatalf("%s: ids %d..%d; the manifest says %d..%d", f.Key, rows[0].ID, rows[len(rows)-1].ID, f.FirstID, f.LastID)
		}
	}
	if int64(len(ids)) != m.Rows || (len(ids) > 0 && (ids[0] != m.FirstID || ids[len(ids)-1] != m.LastID)) {
		t.Fatalf("%s: %d rows in the files, the manifest says %d (ids %d..%d)", prefix, len(ids), m.Rows, m.FirstID, m.LastID)
	}
	return m, ids
}

// acceptedIDs lists the ids of project's accepted rows of a job.
func acceptedIDs(t *testing.T, st jobstore.ObservationStore, project, jobID string) []int64 {
	t.Helper()
	rows, err := st.ListObservations(t.Context(), jobstore.ObservationFilter{Project: project, JobID: jobID, Limit: jobstore.MaxObservationPage})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestExportPartitionsOnce: two coordinators on one PostgreSQL export a
// project's observations into a real MinIO bucket, each complete UTC day
// of accepted_at once: between them every partition is written by one of
// them (attempt 1), as Parquet files of at most file_rows rows each
// (part-00000, part-00001, ...) holding exactly the day's accepted rows
// (a stale holder's refused row is in none), and a manifest whose sizes,
// sha256 and row counts are the files'. A day not yet complete on the
// clock (ended less than the grace period ago) is not exported. Another
// pass of both writes nothing: every object keeps its ETag. A later day
// whose first writer crashed (its claim expired, a half-written file and
// a file past the end of its rows left behind) is taken over at attempt 2:
// the stray file is removed before the manifest, the other overwritten.
// One whose writer died after its manifest is recorded finished from that
// manifest, nothing written again.
func TestExportPartitionsOnce(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	mio := testenv.MinIO(t)
	st1, st2 := openPostgres(t, dsn).(sqlstore.Lab), openPostgres(t, dsn).(sqlstore.Lab)
	bucket, err := coordinator.NewS3Bucket(coordinator.S3Options{Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket,
		AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	mc := mio.Client(t)

	// Rows accepted on three days: yesterday (job early), today (job
	// today, with a stale holder's refused row; job elsewhere of project
	// other).
	yesterday := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	today, tomorrow := yesterday.Add(24*time.Hour), yesterday.Add(48*time.Hour)
	exportSeed(t, st1, "lab", "early", 4, false)
	exportSeed(t, st1, "lab", "first", 1, false)
	exportSeed(t, st1, "lab", "today", 7, true)
	exportSeed(t, st1, "other", "elsewhere", 2, false)
	setAccepted(t, dsn, "early", yesterday.Add(23*time.Hour+59*time.Minute+59*time.Second))
	setAccepted(t, dsn, "first", today)
	setAccepted(t, dsn, "today", today.Add(time.Minute))
	setAccepted(t, dsn, "elsewhere", today.Add(12*time.Hour))

	// The exporters' clock: a settable time, in place of the database's.
	var (
		clockMu sync.Mutex
		clock   = today.Add(time.Hour) // today has not ended
	)
	setClock := func(t time.Time) { clockMu.Lock(); clock = t; clockMu.Unlock() }
	now := func(context.Context) (time.Time, error) { clockMu.Lock(); defer clockMu.Unlock(); return clock, nil }
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	opts := coordinator.ExportOptions{Bucket: bucket, Every: time.Hour, After: 30 * time.Minute, FileRows: 3, Now: now}
	e1, err := coordinator.NewExporter(st1, "c1", opts, log)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := coordinator.NewExporter(st2, "c2", opts, log)
	if err != nil {
		t.Fatal(err)
	}
	both := func() [2]coordinator.ExportPass {
		t.Helper()
		var (
			wg     sync.WaitGroup
			passes [2]coordinator.ExportPass
			errs   [2]error
		)
		for i, e := range []*coordinator.Exporter{e1, e2} {
			wg.Go(func() { passes[i], errs[i] = e.Pass(t.Context()) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("passes: %v, %v", errs[0], errs[1])
		}
		return passes
	}

	// Yesterday is complete; today is not.
	p := both()
	if w := p[0].Written + p[1].Written; w != 1 || p[0].Failed+p[1].Failed != 0 {
		t.Fatalf("first passes: %+v; want yesterday's partition of lab written once", p)
	}
	if _, err := mc.StatObject(t.Context(), mio.Bucket, coordinator.ExportPartitionPrefix("lab", today)+coordinator.ManifestName, minio.StatObjectOptions{}); err == nil {
		t.Fatal("today's partition was written before the day ended")
	}
	// Today ends; the grace period passes.
	setClock(today.Add(24*time.Hour + 31*time.Minute))
	p = both()
	if w := p[0].Written + p[1].Written; w != 2 {
		t.Fatalf("passes after today ended: %+v; want today's partitions of lab and other written once", p)
	}

	_, ids := checkPartition(t, mc, mio.Bucket, "lab", yesterday)
	if want := acceptedIDs(t, st1.(jobstore.ObservationStore), "lab", "early"); !slices.Equal(ids, want) {
		t.Errorf("lab yesterday holds ids %v, want %v", ids, want)
	}
	// The stale holder's refused row has an id between those of the
	// day's accepted rows, and is in no file.
	m, ids := checkPartition(t, mc, mio.Bucket, "lab", today)
	want := append(acceptedIDs(t, st1.(jobstore.ObservationStore), "lab", "first"), acceptedIDs(t, st1.(jobstore.ObservationStore), "lab", "today")...)
	if !slices.Equal(ids, want) || len(m.Files) != 3 || m.Files[0].Rows != 3 || m.Files[2].Rows != 2 {
		t.Errorf("lab today holds ids %v in %d files, want %v in files of 3, 3 and 2 rows: %+v", ids, len(m.Files), want, m.Files)
	}
	if _, ids := checkPartition(t, mc, mio.Bucket, "other", today); len(ids) != 2 {
		t.Errorf("other today: %v", ids)
	}
	es := st1.(jobstore.ExportStore)
	for _, proj := range []string{"lab", "other"} {
		parts, err := es.ExportPartitions(t.Context(), proj, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range parts {
			if pt.Attempt != 1 || pt.Finished.IsZero() || (pt.Owner != "c1" && pt.Owner != "c2") {
				t.Errorf("partition %s/%s: %+v, want finished at attempt 1", proj, pt.Day.Format("2006-01-02"), pt)
			}
		}
	}

	// Nothing new: another pass of both writes nothing, not even again.
	before := objects(t, mc, mio.Bucket, coordinator.ExportPrefix)
	p = both()
	if p[0] != (coordinator.ExportPass{}) || p[1] != (coordinator.ExportPass{}) {
		t.Errorf("passes with nothing new: %+v", p)
	}
	if after := objects(t, mc, mio.Bucket, coordinator.ExportPrefix); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("objects changed by a pass with nothing new:\n before %v\n after  %v", before, after)
	}

	// Tomorrow: its first writer claims it, leaves a half-written first
	// file and a file past the end of its rows, and dies.
	exportSeed(t, st1, "lab", "tomorrow", 2, false)
	setAccepted(t, dsn, "tomorrow", tomorrow.Add(time.Hour))
	setClock(tomorrow.Add(24*time.Hour + 31*time.Minute))
	if _, err := es.ClaimExport(t.Context(), "lab", tomorrow, "crashed", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	prefix := coordinator.ExportPartitionPrefix("lab", tomorrow)
	for _, name := range []string{"part-00000.parquet", "part-00004.parquet"} {
		if _, err := mc.PutObject(t.Context(), mio.Bucket, prefix+name, strings.NewReader("PAR1 cut"), 8, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var taken coordinator.ExportPass
	testenv.Eventually(t, 30*time.Second, "the crashed writer's partition taken over", func() bool {
		pass, err := e1.Pass(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		taken.Written += pass.Written
		return taken.Written > 0
	})
	if taken.Written != 1 {
		t.Fatalf("takeover passes: %+v", taken)
	}
	_, ids = checkPartition(t, mc, mio.Bucket, "lab", tomorrow)
	if want := acceptedIDs(t, st1.(jobstore.ObservationStore), "lab", "tomorrow"); !slices.Equal(ids, want) {
		t.Errorf("lab tomorrow holds ids %v, want %v", ids, want)
	}
	if _, ok := objects(t, mc, mio.Bucket, prefix)[prefix+"part-00004.parquet"]; ok {
		t.Error("the crashed writer's file past the end of the rows is still there")
	}
	parts, err := es.ExportPartitions(t.Context(), "lab", 10)
	if err != nil || len(parts) != 3 || parts[2].Attempt != 2 || parts[2].Owner != "c1" || parts[2].Finished.IsZero() {
		t.Errorf("partitions of lab: %+v, %v; want tomorrow's finished by c1 at attempt 2", parts, err)
	}

	// A writer that died after its manifest, before the store recorded
	// the partition finished: the manifest is taken as it is.
	later := tomorrow.Add(24 * time.Hour)
	if _, err := es.ClaimExport(t.Context(), "lab", later, "crashed", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(coordinator.ExportManifest{Format: coordinator.ManifestFormat, SchemaVersion: dataset.SchemaVersion,
		Project: "lab", Date: later.Format("2006-01-02"), AcceptedFrom: later, AcceptedUntil: later.Add(24 * time.Hour),
		Files: []coordinator.ExportFile{}, WrittenBy: "crashed", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	key := coordinator.ExportPartitionPrefix("lab", later) + coordinator.ManifestName
	info, err := mc.PutObject(t.Context(), mio.Bucket, key, bytes.NewReader(manifest), int64(len(manifest)), minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClock(later.Add(24*time.Hour + 31*time.Minute))
	testenv.Eventually(t, 30*time.Second, "the partition with a manifest recorded finished", func() bool {
		pass, err := e2.Pass(t.Context())
		if err != nil || pass.Written != 0 || pass.Failed != 0 {
			t.Fatalf("pass: %+v, %v; want nothing written", pass, err)
		}
		return pass.Recovered == 1
	})
	parts, err = es.ExportPartitions(t.Context(), "lab", 10)
	if err != nil || len(parts) != 4 || parts[3].Attempt != 2 || parts[3].Owner != "c2" || parts[3].Finished.IsZero() || parts[3].Files != 0 {
		t.Errorf("partitions of lab: %+v, %v; want the last one finished by c2 at attempt 2", parts, err)
	}
	if got := objects(t, mc, mio.Bucket, coordinator.ExportPartitionPrefix("lab", later)); len(got) != 1 || got[key] != info.ETag {
		t.Errorf("the recovered partition's objects: %v; want its manifest alone, as it was (%s)", got, info.ETag)
	}
}
