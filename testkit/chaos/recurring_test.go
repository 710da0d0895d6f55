package chaos

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestRecurringCreatedAfterItsEnd: a schedule the harness creates after its
// end (the process stalled past it) is stored ended, with no first slot,
// whatever number of slots behind its plan asked for; the checker then
// expects no slot and no job of it, and a slot recorded for it anyway is
// a violation. A schedule created before its end starts the plan's slots
// behind the first slot after the database clock.
func TestRecurringCreatedAfterItsEnd(t *testing.T) {
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	req := func(end time.Time) api.ScheduleRequest {
		return api.ScheduleRequest{
			Fields: schedule.Fields{Every: "1s", CatchUp: "1h", Overlap: schedule.OverlapAllow, End: end},
			Job: api.JobRequest{Project: recurringProject(1), Device: protocol.DeviceSelector{Serial: "no-such-phone"},
				Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}},
		}
	}
	before := time.Now()
	ended, err := createRecurring(t.Context(), st, req(before.Add(-time.Minute).Truncate(time.Second)), 4)
	if err != nil {
		t.Fatal(err)
	}
	if !ended.NextAt.IsZero() {
		t.Fatalf("a schedule created a minute after its end has first slot %s, want none", ended.NextAt.Format(time.RFC3339Nano))
	}
	live, err := createRecurring(t.Context(), st, req(before.Add(time.Hour).Truncate(time.Second)), 4)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Truncate(time.Second).Add(-4*time.Second), time.Now().Add(-3*time.Second); live.NextAt.Before(lo) || live.NextAt.After(hi) {
		t.Fatalf("4 slots behind: first slot %s, want between %s and %s", live.NextAt.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	}

	plan := RecurringPlan{Every: time.Second, CatchUp: time.Hour, Overlap: schedule.OverlapAllow, Behind: 4}
	check := func(rf RecurringFinal) *Report {
		rep := &Report{}
		checkRecurring(&History{Final: Final{Recurring: []RecurringFinal{rf}}}, rep)
		return rep
	}
	rf := RecurringFinal{Plan: plan, Schedule: ended, End: before.Add(-time.Minute), Ended: true}
	if rep := check(rf); len(rep.Violations) != 0 {
		t.Fatalf("a schedule created after its end, with no slot: %v", rep.Violations)
	}
	rf.Slots = []jobstore.Slot{{ScheduledAt: before.Add(-2 * time.Minute).Truncate(time.Second), Outcome: jobstore.SlotMissed, Count: 1}}
	rep := check(rf)
	if len(rep.Violations) != 1 || rep.Violations[0].Rule != RuleScheduleSlots || !strings.Contains(rep.Violations[0].Detail, "created after its end") {
		t.Fatalf("a schedule created after its end with a slot recorded: violations %v, want one %s naming it", rep.Violations, RuleScheduleSlots)
	}
}
