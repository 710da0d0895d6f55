// Package schedule is the timing of recurring schedules (docs/schedules.md):
// a schedule file's cron expression with its IANA time zone, or its fixed
// interval, checked with errors naming the key at fault (Parse), and the
// slots it fires: the next ones (Next, Upcoming), with the clock-change
// rule of docs/schedules.md applied in the schedule's zone, and what one
// evaluation does after an outage (Plan: the latest slot within catch_up
// fires, older ones are recorded as missed).
//
// It is pure: no store, clock or network. The store keeps schedules and
// their slots (jobstore.ScheduleStore), the coordinator's schedule loop
// evaluates them on the database clock. Not to be confused with the
// coordinator's scheduler (coordinator/scheduler.go), which grants queued
// jobs to phones.
package schedule
