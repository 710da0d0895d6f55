package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
)

// ScheduleRequest is a schedule: the fields of a schedule file (`edgecoord
// schedule create -f`), which are also the body of POST
// /api/v1/schedules (docs/schedules.md): the timing keys and the job it
// fires, any job file.
type ScheduleRequest struct {
	schedule.Fields `yaml:",inline"`
	Job             JobRequest `json:"job"`
}

// ParseScheduleFile decodes a schedule file (YAML, or JSON) strictly into
// req: unknown keys are errors, with their line and column.
func ParseScheduleFile(data []byte, req *ScheduleRequest) error {
	return yaml.UnmarshalWithOptions(data, req, yaml.Strict(), yaml.DisallowUnknownField())
}

// ScheduleFromStore decodes a stored schedule's document and its timing.
// The timing was checked when the schedule was created; it is read again
// with the lowest minimum interval, so that a coordinator whose
// schedules.min_every is higher still evaluates it.
func ScheduleFromStore(sc jobstore.Schedule) (ScheduleRequest, schedule.Spec, error) {
	var req ScheduleRequest
	if err := json.Unmarshal(sc.Spec, &req); err != nil {
		return ScheduleRequest{}, schedule.Spec{}, fmt.Errorf("decode schedule %s: %w", sc.ID, err)
	}
	spec, err := schedule.Parse(req.Fields, schedule.Limits{MinEvery: schedule.MinEveryFloor})
	if err != nil {
		return ScheduleRequest{}, schedule.Spec{}, fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	return req, spec, nil
}

// Check checks the schedule as it would be stored: its timing against lim
// (schedule.Parse) and its job as a job submitted with o would be, but
// its phones. The job of a schedule has no id (its jobs are named after
// their slot) and no not_before (their slot is). It returns the timing and
// the job's project. Errors are *SubmitError naming the key ("cron",
// "job.steps[0].op").
func (r ScheduleRequest) Check(o SubmitOptions, lim schedule.Limits) (schedule.Spec, string, error) {
	spec, err := schedule.Parse(r.Fields, lim)
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		return schedule.Spec{}, "", &SubmitError{Field: fe.Field, Err: err}
	}
	if err != nil {
		return schedule.Spec{}, "", err
	}
	if r.Job.ID != "" {
		return schedule.Spec{}, "", submitErr("job.id", "a schedule's jobs are named after their slot: leave id out")
	}
	if !r.Job.NotBefore.IsZero() {
		return schedule.Spec{}, "", submitErr("job.not_before", "a scheduled job waits for its slot (and jitter): leave not_before out")
	}
	job := r.Job
	job.FanOut = false
	specs, _, err := job.Specs(context.Background(), nil, o)
	var se *SubmitError
	if errors.As(err, &se) {
		field := "job"
		if se.Field != "" {
			field += "." + se.Field
		}
		return schedule.Spec{}, "", &SubmitError{Field: field, Err: fmt.Errorf("job: %w", se.Err)}
	}
	if err != nil {
		return schedule.Spec{}, "", err
	}
	return spec, specs[0].Project, nil
}

// NewScheduleID returns a random schedule id: "sch-" and 12 hex digits,
// short enough that its slots' job ids fit (SlotJobID).
func NewScheduleID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sch-" + hex.EncodeToString(b[:])
}

// SlotJobID is the id of the job a slot of schedule id queues, or of the
// batch of a fan-out (whose jobs are SlotJobID-1, -2, …): the schedule's
// id and the slot's UTC time, "sch-0123456789ab-20261205T000000Z".
func SlotJobID(id string, slot time.Time) string {
	return id + "-" + slot.UTC().Format("20060102T150405Z")
}

// SlotJobs is what slot of the stored schedule sc queues: its job as
// POST /api/v1/jobs would submit it with o (a fan-out over the phones
// ready now), named after the slot (SlotJobID) and spread over the jitter
// window by not_before. A request the coordinator refuses now (a fan-out
// no phone matches) is no error: no job, and why.
func SlotJobs(ctx context.Context, store jobstore.Store, sc jobstore.Schedule, slot time.Time, o SubmitOptions) ([]jobstore.JobSpec, string, error) {
	req, spec, err := ScheduleFromStore(sc)
	if err != nil {
		return nil, "", err
	}
	job := req.Job
	job.ID = SlotJobID(sc.ID, slot)
	job.Project = sc.Project
	o.Projects = nil
	o.SubmittedBy = "schedule " + sc.ID
	specs, _, err := job.Specs(ctx, store, o)
	var se *SubmitError
	if errors.As(err, &se) {
		return nil, se.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	for i, d := range spec.Offsets(len(specs)) {
		if d > 0 {
			specs[i].NotBefore = slot.Add(d)
		}
	}
	return specs, "", nil
}
