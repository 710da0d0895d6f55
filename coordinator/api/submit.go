package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// JobRequest is a job to submit: the fields of a job file (`edgecoord job
// submit -f`), which are also the body of POST /api/v1/jobs, plus fan_out
// (docs/api.md, "Submit"). The json tags are the keys of both; the YAML
// decoder of job files reads them too.
type JobRequest struct {
	ID     string                  `json:"id,omitempty"`
	Device protocol.DeviceSelector `json:"device"`
	Steps  []protocol.Step         `json:"steps"`
	// Interactive and IdleTimeoutMS mirror protocol.Task.
	Interactive   bool  `json:"interactive,omitempty"`
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	// Capture and Logcat mirror protocol.Task.
	Capture string `json:"capture,omitempty"`
	Logcat  bool   `json:"logcat,omitempty"`
	// Timeout is the job's deadline from its first grant, a Go duration
	// ("90s", "10m").
	Timeout     string    `json:"timeout,omitempty"`
	Project     string    `json:"project,omitempty"`
	Priority    int       `json:"priority,omitempty"`
	NotBefore   time.Time `json:"not_before,omitzero"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	// FanOut makes one job per phone that matches Device, each pinned to
	// its phone by serial.
	FanOut bool `json:"fan_out,omitempty"`
}

// SubmitOptions says who submits and which projects they may use.
type SubmitOptions struct {
	// SubmittedBy is recorded with every job (a token name, "cli").
	SubmittedBy string
	// Projects are those the submitter may use; nil allows every project.
	// A request without a project gets the only one of them, or
	// jobstore.DefaultProject when Projects is nil.
	Projects []string
	// OfflineAfter judges which agents are online for a fan-out; 0 counts
	// every registered agent.
	OfflineAfter time.Duration
	// Phones is the coordinator's rule of which phones a project may use:
	// a fan-out makes jobs only for those of its project. Nil: every phone.
	Phones *coordinator.PhoneRule
	// Agents lists the registered agents for a fan-out; nil: the store's.
	Agents func(ctx context.Context) ([]jobstore.Agent, error)
	// Jobs gives what a request leaves unset: the deadline and the attempt
	// limit (coordinator.ApplyJobDefaults).
	Jobs config.CoordinatorJobs
}

// SubmitError is a request that cannot be submitted: Field names the
// member at fault ("steps[0].op", "project", "device").
type SubmitError struct {
	Field string
	Err   error
}

func (e *SubmitError) Error() string { return e.Err.Error() }
func (e *SubmitError) Unwrap() error { return e.Err }

func submitErr(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &SubmitError{Field: field, Err: errors.New(msg)}
}

// Batch is the jobs of one submit: one job, or one per phone with a batch
// id for a fan-out.
type Batch struct {
	ID   string // "" unless fan-out
	Jobs []jobstore.Job
}

// Specs turns the request into the jobs to submit: it applies the defaults,
// checks every job with jobstore.CheckSubmit, and for a fan-out makes
// one job per phone in state device of an online agent whose phone matches
// the selector, pinned to it by serial. It returns the batch id of a
// fan-out ("" otherwise). Errors are *SubmitError.
func (req JobRequest) Specs(ctx context.Context, store jobstore.Store, o SubmitOptions) ([]jobstore.JobSpec, string, error) {
	project := req.Project
	switch {
	case project == "" && o.Projects == nil:
		project = jobstore.DefaultProject
	case project == "" && len(o.Projects) == 1:
		project = o.Projects[0]
	case project == "":
		return nil, "", submitErr("project", "required: this token covers several projects (%v)", o.Projects)
	}
	if err := jobstore.CheckProject(project); err != nil {
		return nil, "", submitErr("project", "%v", err)
	}
	if o.Projects != nil && !slices.Contains(o.Projects, project) {
		return nil, "", &SubmitError{Field: "project", Err: fmt.Errorf("project: %w: %q is not one of this token's projects %v", errForbiddenProject, project, o.Projects)}
	}
	for i, t := range req.Device.Tags {
		if t == "" {
			return nil, "", submitErr(fmt.Sprintf("device.tags[%d]", i), "empty tag")
		}
	}
	spec := jobstore.JobSpec{
		ID:          req.ID,
		Task:        protocol.Task{Device: req.Device, Steps: req.Steps, Interactive: req.Interactive, IdleTimeoutMS: req.IdleTimeoutMS, Capture: req.Capture, Logcat: req.Logcat},
		Project:     project,
		Priority:    req.Priority,
		NotBefore:   req.NotBefore,
		MaxAttempts: req.MaxAttempts,
		SubmittedBy: o.SubmittedBy,
	}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			return nil, "", submitErr("timeout", "%q is not a positive duration such as 90s or 10m", req.Timeout)
		}
		spec.Task.TimeoutMS = d.Milliseconds()
	}
	spec = coordinator.ApplyJobDefaults(spec, o.Jobs)
	if err := jobstore.CheckSubmit(spec); err != nil {
		field, _ := splitField(err.Error())
		return nil, "", &SubmitError{Field: field, Err: err}
	}
	if err := checkAPKs(ctx, store, spec.Task); err != nil {
		return nil, "", err
	}
	if err := checkIPhone(ctx, store, o, spec.Task, req.FanOut); err != nil {
		return nil, "", err
	}
	if !req.FanOut {
		spec.Task.Device = androidOnly(spec.Task)
		return []jobstore.JobSpec{spec}, "", nil
	}
	batch := req.ID
	if batch == "" {
		batch = newBatchID()
	}
	if len(batch) > protocol.MaxJobIDLen-5 {
		return nil, "", submitErr("id", "a fan-out's id names its batch: at most %d characters, so that its jobs' ids (id-N) fit", protocol.MaxJobIDLen-5)
	}
	phones, refused, err := fanOutPhones(ctx, store, o, spec)
	if err != nil {
		return nil, "", err
	}
	if err := refuseOnIPhones(spec.Task, phones, false, fanOutIPhones); err != nil {
		return nil, "", err
	}
	spec.Task.Device = androidOnly(spec.Task)
	serials := make([]string, 0, len(phones))
	for _, p := range phones {
		serials = append(serials, p.Serial)
	}
	if len(serials) == 0 && len(refused) > 0 {
		return nil, "", submitErr("device", "fan_out: no phone matching %s may be used by project %s (%s)",
			coordinator.DescribeSelector(req.Device), spec.Project, strings.Join(refused, "; "))
	}
	if len(serials) == 0 {
		return nil, "", submitErr("device", "fan_out: no phone of an online agent matches %s", coordinator.DescribeSelector(req.Device))
	}
	if len(serials) > 999 {
		return nil, "", submitErr("device", "fan_out: %d phones match; at most 999 per batch", len(serials))
	}
	slices.Sort(serials)
	specs := make([]jobstore.JobSpec, 0, len(serials))
	for i, serial := range serials {
		s := spec
		s.ID = fmt.Sprintf("%s-%d", batch, i+1)
		s.Task.Device.Serial = serial
		specs = append(specs, s)
	}
	return specs, batch, nil
}

// agents lists the registered agents: o.Agents, else the store's.
func (o SubmitOptions) agents(ctx context.Context, store jobstore.Store) ([]jobstore.Agent, error) {
	if o.Agents != nil {
		return o.Agents(ctx)
	}
	return store.Agents(ctx)
}

// fanOutPhone is a phone a fan-out makes a job for.
type fanOutPhone struct {
	protocol.Device
	Agent string
}

// fanOutPhones returns the phones a fan-out of spec makes jobs for: each
// phone in state device of an online agent that matches the selector and
// that the project may use, once; and the matching phones the project may
// not use, with why.
func fanOutPhones(ctx context.Context, store jobstore.Store, o SubmitOptions, spec jobstore.JobSpec) ([]fanOutPhone, []string, error) {
	all, err := o.agents(ctx, store)
	if err != nil {
		return nil, nil, fmt.Errorf("list agents for fan-out: %w", err)
	}
	var (
		phones  []fanOutPhone
		seen    = map[string]bool{}
		refused []string
	)
	dups := coordinator.DuplicateSerials(all, o.OfflineAfter)
	for _, a := range all {
		if o.OfflineAfter > 0 && !a.Online(o.OfflineAfter) {
			continue
		}
		for _, d := range a.Devices {
			if !d.Ready() || !spec.Task.Device.Matches(d) || seen[d.Serial] {
				continue
			}
			if why := o.Phones.Refusal(spec.Project, a.ID, d, dups); why != "" {
				refused = append(refused, fmt.Sprintf("%s of agent %s: %s", d.Serial, a.ID, why))
				continue
			}
			seen[d.Serial] = true
			phones = append(phones, fanOutPhone{Device: d, Agent: a.ID})
		}
	}
	return phones, refused, nil
}

// fanOutIPhones is why a fan-out is refused on iPhones (refuseOnIPhones),
// the phones it names following.
const fanOutIPhones = "fan_out: set device.platform android to run it on the Android phones only; the matching phones include iPhones"

// maxNamedIPhones bounds the iPhones a refusal names.
const maxNamedIPhones = 5

// checkIPhone refuses a task that asks what an iPhone cannot do
// (protocol.UnsupportedOn) when it would run on an iPhone: its selector's
// platform is ios, or it is pinned by serial to a phone an agent reports
// as an iPhone (docs/api.md, iPhones). The iPhones of a fan-out are
// checked with its phones (Specs). Without a store only the platform is
// checked.
func checkIPhone(ctx context.Context, store jobstore.Store, o SubmitOptions, task protocol.Task, fanOut bool) error {
	if len(protocol.UnsupportedOn(protocol.PlatformIOS, task)) == 0 {
		return nil
	}
	sel := task.Device
	switch {
	case sel.Platform == protocol.PlatformIOS:
		return refuseOnIPhones(task, nil, true, "device.platform is ios")
	case sel.Platform != "" || sel.Serial == "" || fanOut || store == nil:
		return nil
	}
	all, err := o.agents(ctx, store)
	if err != nil {
		return fmt.Errorf("list agents for device.serial: %w", err)
	}
	var iphones []fanOutPhone
	for _, a := range all {
		for _, d := range a.Devices {
			if d.Serial == sel.Serial && protocol.PlatformOf(d) == protocol.PlatformIOS {
				iphones = append(iphones, fanOutPhone{Device: d, Agent: a.ID})
			}
		}
	}
	return refuseOnIPhones(task, iphones, false, "device.serial names an iPhone")
}

// checkIPhones refuses, for a schedule's job of project, what an iPhone
// cannot do on the iPhones it would run on now: the phone its selector
// pins, or those of its fan-out (checkIPhone, fanOutPhones). Errors are
// *SubmitError naming the job's key ("job.logcat").
func (req JobRequest) checkIPhones(ctx context.Context, store jobstore.Store, o SubmitOptions, project string) error {
	spec := jobstore.JobSpec{Project: project, Task: protocol.Task{Device: req.Device, Steps: req.Steps, Logcat: req.Logcat}}
	err := checkIPhone(ctx, store, o, spec.Task, req.FanOut)
	if err == nil && req.FanOut && len(protocol.UnsupportedOn(protocol.PlatformIOS, spec.Task)) > 0 {
		var phones []fanOutPhone
		if phones, _, err = fanOutPhones(ctx, store, o, spec); err == nil {
			err = refuseOnIPhones(spec.Task, phones, false, fanOutIPhones)
		}
	}
	var se *SubmitError
	if errors.As(err, &se) {
		return &SubmitError{Field: "job." + se.Field, Err: fmt.Errorf("job: %w", se.Err)}
	}
	return err
}

// refuseOnIPhones is the refusal of task on the iPhones among phones
// (named, at most maxNamedIPhones), or, with every, on any phone of its
// selector: a *SubmitError whose field is the first thing task asks that
// an iPhone cannot do, saying why and each of them. Nil when task asks
// nothing an iPhone cannot do, or (without every) phones holds no iPhone.
func refuseOnIPhones(task protocol.Task, phones []fanOutPhone, every bool, why string) error {
	un := protocol.UnsupportedOn(protocol.PlatformIOS, task)
	if len(un) == 0 {
		return nil
	}
	var named []string
	n := 0
	for _, p := range phones {
		if protocol.PlatformOf(p.Device) != protocol.PlatformIOS {
			continue
		}
		if n++; n <= maxNamedIPhones {
			named = append(named, fmt.Sprintf("%s of agent %s", p.Serial, p.Agent))
		}
	}
	if !every && n == 0 {
		return nil
	}
	if n > maxNamedIPhones {
		named = append(named, fmt.Sprintf("and %d more", n-maxNamedIPhones))
	}
	if len(named) > 0 {
		why += ": " + strings.Join(named, ", ")
	}
	field, _, _ := strings.Cut(un[0], ":")
	field, _, _ = strings.Cut(field, " ")
	return &SubmitError{Field: field, Err: fmt.Errorf("%s (an iPhone cannot run it: %s)", strings.Join(un, "; "), why)}
}

// androidOnly is the selector of task as submitted: a task without a
// platform that asks what an iPhone cannot do runs on Android phones only
// (platform android; docs/api.md, iPhones).
func androidOnly(task protocol.Task) protocol.DeviceSelector {
	sel := task.Device
	if sel.Platform == "" && len(protocol.UnsupportedOn(protocol.PlatformIOS, task)) > 0 {
		sel.Platform = protocol.PlatformAndroid
	}
	return sel
}

// Check checks the request as Specs does, except the phones of a fan-out,
// without a store: a job file can be checked before the store is opened.
func (req JobRequest) Check() error {
	req.FanOut = false
	_, _, err := req.Specs(context.Background(), nil, SubmitOptions{})
	return err
}

var errForbiddenProject = errors.New("forbidden")

func newBatchID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestHash is the hash an Idempotency-Key is stored with: of the
// request as decoded, so that spacing and key order do not matter.
func (req JobRequest) RequestHash() string {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Submit submits the jobs of req in one transaction (all or none) and
// returns them. `edgecoord job submit` and POST /api/v1/jobs both submit
// through it, so a job file and an API request give the same jobs. The
// store must implement jobstore.APIStore for a fan-out; a single job
// goes through Store.Submit.
func Submit(ctx context.Context, store jobstore.Store, req JobRequest, o SubmitOptions) (Batch, error) {
	specs, batch, err := req.Specs(ctx, store, o)
	if err != nil {
		return Batch{}, err
	}
	if len(specs) == 1 && batch == "" {
		j, err := store.Submit(ctx, specs[0])
		if err != nil {
			return Batch{}, err
		}
		return Batch{Jobs: []jobstore.Job{j}}, nil
	}
	as, ok := store.(jobstore.APIStore)
	if !ok {
		return Batch{}, fmt.Errorf("submit fan-out: the store %T cannot submit a batch", store)
	}
	jobs, err := as.SubmitAll(ctx, specs)
	if err != nil {
		return Batch{}, err
	}
	return Batch{ID: batch, Jobs: jobs}, nil
}

// checkAPKs refuses an install_app step whose APK is not stored, naming
// the step (steps[i].apk). Without a store (Check) it checks nothing.
func checkAPKs(ctx context.Context, store jobstore.Store, task protocol.Task) error {
	if store == nil || len(task.APKs()) == 0 {
		return nil
	}
	as, ok := store.(jobstore.APKStore)
	for i, st := range task.Steps {
		if st.Op != protocol.OpInstallApp {
			continue
		}
		field := fmt.Sprintf("steps[%d].apk", i)
		if !ok {
			return submitErr(field, "this coordinator's store keeps no APKs")
		}
		_, err := as.GetAPK(ctx, st.APK)
		if errors.Is(err, jobstore.ErrAPKNotFound) {
			return submitErr(field, "no APK %s is stored (add it with edgecoord apk add)", st.APK)
		}
		if err != nil {
			return fmt.Errorf("check %s: %w", field, err)
		}
	}
	return nil
}
