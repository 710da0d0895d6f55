package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var exportTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"ExportClaims", testExportClaims},
	{"ExportClaimRace", testExportClaimRace},
	{"ExportDays", testExportDays},
}

func exportStore(t *testing.T, s sqlstore.Lab) jobstore.ExportStore {
	t.Helper()
	es, ok := s.(jobstore.ExportStore)
	if !ok {
		t.Fatalf("%T is not a jobstore.ExportStore", s)
	}
	return es
}

// exportDay is a UTC midnight of the suite's export partitions.
var exportDay = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// testExportClaims: a partition is claimed once: a second claim, by
// another coordinator or the same, is refused while the first lasts; the
// holder renews and finishes it, nobody else can; a claim that expired
// unfinished is taken over at the next attempt, after which the first
// holder can neither renew nor finish; a finished partition is never
// claimed again. The progress of a project names its latest day and its
// unfinished partitions.
func testExportClaims(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := exportStore(t, s)
	if latest, unfinished, err := es.ExportProgress(ctx, "lab"); err != nil || !latest.IsZero() || len(unfinished) != 0 {
		t.Fatalf("progress of a project never exported: %s %v %v", latest, unfinished, err)
	}
	d1, d2, d3 := exportDay, exportDay.Add(24*time.Hour), exportDay.Add(48*time.Hour)

	c1, err := es.ClaimExport(ctx, "lab", d1, "coord-1", long)
	if err != nil || c1.Attempt != 1 || !c1.Day.Equal(d1) || c1.Owner != "coord-1" || c1.Project != "lab" {
		t.Fatalf("first claim: %+v, %v", c1, err)
	}
	for _, owner := range []string{"coord-2", "coord-1"} {
		if c, err := es.ClaimExport(ctx, "lab", d1, owner, long); !errors.Is(err, jobstore.ErrConflict) {
			t.Fatalf("a second claim by %s while the first lasts: %+v, %v", owner, c, err)
		}
	}
	// The same day of another project is another partition.
	if c, err := es.ClaimExport(ctx, "other", d1, "coord-2", long); err != nil || c.Attempt != 1 {
		t.Fatalf("claim of another project's day: %+v, %v", c, err)
	}
	thief := c1
	thief.Owner = "coord-2"
	if err := es.RenewExport(ctx, thief, long); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("renewal by a coordinator that does not hold the claim: %v", err)
	}
	if err := es.FinishExport(ctx, thief, jobstore.ExportDone{Files: 1, Rows: 1, Bytes: 1, FirstID: 1, LastID: 1}); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("finish by a coordinator that does not hold the claim: %v", err)
	}
	if err := es.RenewExport(ctx, c1, long); err != nil {
		t.Fatalf("renewal by the holder: %v", err)
	}
	done := jobstore.ExportDone{Files: 2, Rows: 1500, Bytes: 123456, FirstID: 7, LastID: 2000}
	if err := es.FinishExport(ctx, c1, done); err != nil {
		t.Fatalf("finish by the holder: %v", err)
	}
	if err := es.FinishExport(ctx, c1, done); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("a second finish: %v", err)
	}
	if err := es.RenewExport(ctx, c1, long); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("renewal of a finished partition: %v", err)
	}
	if c, err := es.ClaimExport(ctx, "lab", d1, "coord-2", long); !errors.Is(err, jobstore.ErrConflict) {
		t.Fatalf("claim of a finished partition: %+v, %v", c, err)
	}

	// A claim that expires unfinished (its writer crashed) is taken over.
	c2, err := es.ClaimExport(ctx, "lab", d2, "coord-1", short)
	if err != nil || c2.Attempt != 1 {
		t.Fatalf("claim of day 2: %+v, %v", c2, err)
	}
	time.Sleep(expiredWait)
	if err := es.RenewExport(ctx, c2, long); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("renewal of an expired claim: %v", err)
	}
	c2b, err := es.ClaimExport(ctx, "lab", d2, "coord-2", long)
	if err != nil || c2b.Attempt != 2 || c2b.Owner != "coord-2" {
		t.Fatalf("takeover of an expired claim: %+v, %v", c2b, err)
	}
	if err := es.FinishExport(ctx, c2, done); !errors.Is(err, jobstore.ErrExportLost) {
		t.Fatalf("finish by the holder of a claim taken over: %v", err)
	}
	if _, err := es.ClaimExport(ctx, "lab", d3, "coord-1", long); err != nil {
		t.Fatalf("claim of day 3: %v", err)
	}
	latest, unfinished, err := es.ExportProgress(ctx, "lab")
	if err != nil || !latest.Equal(d3) || len(unfinished) != 2 || !unfinished[0].Day.Equal(d2) || !unfinished[1].Day.Equal(d3) ||
		unfinished[0].Owner != "coord-2" || unfinished[0].Attempt != 2 || !unfinished[0].Finished.IsZero() || unfinished[0].ClaimExpires.IsZero() {
		t.Fatalf("progress: latest %s, unfinished %+v, %v", latest, unfinished, err)
	}
	if err := es.FinishExport(ctx, c2b, jobstore.ExportDone{}); err != nil {
		t.Fatalf("finish of an empty partition by the new holder: %v", err)
	}
	parts, err := es.ExportPartitions(ctx, "lab", jobstore.MaxUnfinishedExports)
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions: %+v, %v", parts, err)
	}
	if p := parts[0]; !p.Day.Equal(d1) || p.Owner != "coord-1" || p.Attempt != 1 || p.Finished.IsZero() || p.ExportDone != done {
		t.Errorf("finished partition: %+v", p)
	}
	if p := parts[1]; !p.Day.Equal(d2) || p.Attempt != 2 || p.Finished.IsZero() || p.ExportDone != (jobstore.ExportDone{}) {
		t.Errorf("partition taken over: %+v", p)
	}

	// Bad claims write nothing.
	for _, bad := range []struct {
		project, owner string
		day            time.Time
	}{
		{"lab", "coord-1", d1.Add(time.Hour)},
		{"", "coord-1", d1},
		{"lab/..", "coord-1", d1},
		{"lab", "", d1},
	} {
		if c, err := es.ClaimExport(ctx, bad.project, bad.day, bad.owner, long); err == nil || errors.Is(err, jobstore.ErrConflict) {
			t.Errorf("claim %q %s by %q: %+v, %v", bad.project, bad.day, bad.owner, c, err)
		}
	}
	if err := es.FinishExport(ctx, c2b, jobstore.ExportDone{Rows: -1}); err == nil || errors.Is(err, jobstore.ErrExportLost) {
		t.Errorf("finish with a negative row count: %v", err)
	}
}

// testExportClaimRace: coordinators claiming the same partition at once
// get one claim between them.
func testExportClaimRace(t *testing.T, s sqlstore.Lab) {
	es := exportStore(t, s)
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []string
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			owner := "coord-" + string(rune('a'+i))
			_, err := es.ClaimExport(t.Context(), "lab", exportDay, owner, long)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, owner)
			case !errors.Is(err, jobstore.ErrConflict):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 || len(errs) != 0 {
		t.Fatalf("%d coordinators claimed the partition at once: won %v, errors %v", n, won, errs)
	}
}

// testExportDays: the projects with observations are listed by name; the
// next day of a project with accepted rows is the UTC day of their
// accepted_at (the database clock), with the lowest and highest id and
// the count of its accepted rows (a stale holder's refused rows are not
// counted); a window that ends at that day, or starts after it, finds
// none.
func testExportDays(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := exportStore(t, s)
	os := observationStore(t, s)
	if ps, err := es.ExportProjects(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("projects of an empty store: %v, %v", ps, err)
	}
	for _, p := range []string{"zeta", "lab", "alpha"} {
		submitIn(t, s, "exp-"+p, p)
		l := claim(t, s, "exp-"+p, ownerA, long)
		obs := []protocol.Observation{priceObs(1, "price", "¥1,280", "1280"), priceObs(2, "price", "¥980", "980")}
		if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"), Observations: obs}); err != nil {
			t.Fatal(err)
		}
	}
	// A stale holder's refused rows in project lab.
	submitIn(t, s, "exp-stale", "lab")
	old := claim(t, s, "exp-stale", ownerA, long)
	reassign(t, s, "exp-stale", ownerB)
	if _, err := os.CommitObserved(ctx, old.Token, jobstore.ObservedResult{Result: result("late"),
		Observations: []protocol.Observation{priceObs(1, "price", "¥1", "1")}}); err == nil {
		t.Fatal("a stale holder's result was accepted")
	}
	ps, err := es.ExportProjects(ctx)
	if err != nil || !slices.Equal(ps, []string{"alpha", "lab", "zeta"}) {
		t.Fatalf("projects: %v, %v", ps, err)
	}
	now, err := es.DatabaseNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"})
	if len(rows) != 2 || now.Before(rows[1].AcceptedAt) {
		t.Fatalf("lab rows %+v; database clock %s", rows, now)
	}
	// The rows' day (both, unless they were accepted either side of
	// midnight).
	day := rows[0].AcceptedAt.UTC().Truncate(24 * time.Hour)
	want := jobstore.ExportSpan{Day: day, FirstID: rows[0].ID, LastID: rows[0].ID, Rows: 1}
	if rows[1].AcceptedAt.UTC().Truncate(24 * time.Hour).Equal(day) {
		want.LastID, want.Rows = rows[1].ID, 2
	}
	sp, err := es.NextExportDay(ctx, "lab", time.Time{}, day.Add(48*time.Hour))
	if err != nil || sp != want {
		t.Fatalf("next day of lab: %+v, %v; want %+v", sp, err, want)
	}
	for _, w := range [][2]time.Time{{time.Time{}, day}, {day.Add(48 * time.Hour), day.Add(96 * time.Hour)}} {
		if sp, err := es.NextExportDay(ctx, "lab", w[0], w[1]); err != nil || !sp.Day.IsZero() {
			t.Errorf("next day of lab in [%s, %s): %+v, %v", w[0], w[1], sp, err)
		}
	}
	if sp, err := es.NextExportDay(ctx, "nobody", time.Time{}, day.Add(48*time.Hour)); err != nil || !sp.Day.IsZero() {
		t.Errorf("next day of a project without rows: %+v, %v", sp, err)
	}
}
