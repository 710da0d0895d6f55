package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// WriteCount is the number of accepted and rejected write attempts of one
// verb.
type WriteCount struct {
	Verb     string
	Accepted int64
	Rejected int64
}

// Lab is the surface of a SQL store beyond jobstore.Store that the lab
// (experiments, benchmarks, statistics) and the tests use. The wire protocol
// cannot reach it: no coordinator endpoint calls these methods, and the
// coordinator holds a jobstore.Store, which lacks them.
type Lab interface {
	jobstore.Store
	// ClaimNext grants the oldest queued job to owner (generation + 1),
	// whatever its selector and owner's phones. jobstore.ErrNoJob when
	// none is queued.
	ClaimNext(ctx context.Context, owner string, ttl time.Duration) (jobstore.Lease, error)
	// Claim grants the given queued job to owner (generation + 1).
	// jobstore.ErrConflict when it is not queued.
	Claim(ctx context.Context, jobID, owner string, ttl time.Duration) (jobstore.Lease, error)
	// UnfencedCommit writes a result with no token check at all:
	// UPDATE jobs SET status='SUCCEEDED', result=$r, completed_by=$owner
	// WHERE id=$job. It reports whether a row was updated. It exists only to
	// reproduce the stale-writer experiment; it is recorded in write_events
	// with verb result_unfenced.
	UnfencedCommit(ctx context.Context, jobID, owner string, result json.RawMessage) (bool, error)
	// WriteCounts counts accepted and rejected write_events by verb, sorted
	// by verb.
	WriteCounts(ctx context.Context) ([]WriteCount, error)
}

// NewJobID returns a random job id (24 hex characters).
func NewJobID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random job id: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// storedTask is a task as the stores keep it: the task, and the
// comparisons of its selector's app requirements (AppKeys) that the grant
// SQL reads. Reading the task back into a protocol.Task leaves them out.
type storedTask struct {
	protocol.Task
	AppKeys []AppKey `json:"app_keys,omitempty"`
}

// PrepareSubmit checks a job to submit (jobstore.CheckSubmit) and
// returns its id (a new one when spec has none) and its task encoded for
// storage (storedTask).
func PrepareSubmit(spec jobstore.JobSpec) (id string, task []byte, err error) {
	if err := jobstore.CheckSubmit(spec); err != nil {
		if spec.ID != "" && protocol.CheckJobID(spec.ID) == nil {
			return "", nil, fmt.Errorf("submit job %s: %w", spec.ID, err)
		}
		return "", nil, fmt.Errorf("submit job: %w", err)
	}
	id = spec.ID
	if id == "" {
		id = NewJobID()
	}
	st := storedTask{Task: spec.Task}
	if st.AppKeys, err = AppKeys(spec.Task.Device); err != nil {
		return "", nil, fmt.Errorf("submit job %s: %w", id, err)
	}
	task, err = json.Marshal(st)
	if err != nil {
		return "", nil, fmt.Errorf("submit job %s: %w", id, err)
	}
	return id, task, nil
}

// CheckGrant validates the arguments of a claim or reassignment.
func CheckGrant(owner string, ttl time.Duration) error {
	if owner == "" {
		return fmt.Errorf("owner is empty")
	}
	return CheckTTL(ttl)
}

// CheckTTL validates a lease ttl.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("lease ttl %s is not positive", ttl)
	}
	return nil
}

// MaxBackoffShift bounds the doubling of the backoff (2^20 times the base),
// so the SQL shift never overflows.
const MaxBackoffShift = 20

// Claim is a ClaimRequest checked and prepared for SQL.
type Claim struct {
	AgentID string
	BootID  string
	Owner   string
	Devices []byte // JSON array of the usable phones (ClaimDevice), sorted by serial
	Slots   int
	TTL     time.Duration
	Effects bool // the agent may take jobs with effect steps
	// Limits is a JSON object of the project limits by name
	// (ClaimRequest.ProjectLimits, {} when none), DefaultLimit the limit
	// of every other project; 0 means no limit. Limited reports whether any
	// limit is set: only then do grants count the jobs of a project.
	Limits       []byte
	DefaultLimit int
	Limited      bool
}

// PrepareClaim validates req and keeps only the phones that can take a job
// (state "device", non-empty serial).
func PrepareClaim(req jobstore.ClaimRequest) (Claim, error) {
	agentID, bootID, err := fencing.SplitOwner(req.Owner)
	if err != nil {
		return Claim{}, err
	}
	if err := CheckTTL(req.TTL); err != nil {
		return Claim{}, err
	}
	devs := []ClaimDevice{}
	for _, d := range protocol.ReadyDevices(req.Devices) {
		cd := NewClaimDevice(d)
		if dp, ok := req.DeviceProjects[d.Serial]; ok {
			cd.Only = dp.Only
			if dp.Projects != nil {
				cd.Projects = dp.Projects
			}
		}
		devs = append(devs, cd)
	}
	b, err := json.Marshal(devs)
	if err != nil {
		return Claim{}, err
	}
	if req.DefaultProjectLimit < 0 {
		return Claim{}, fmt.Errorf("default project limit %d is negative", req.DefaultProjectLimit)
	}
	limits := map[string]int{}
	for p, n := range req.ProjectLimits {
		if err := jobstore.CheckProject(p); err != nil {
			return Claim{}, fmt.Errorf("project limit: %w", err)
		}
		if n < 0 {
			return Claim{}, fmt.Errorf("project limit of %s: %d is negative", p, n)
		}
		limits[p] = n
	}
	lb, err := json.Marshal(limits)
	if err != nil {
		return Claim{}, err
	}
	return Claim{AgentID: agentID, BootID: bootID, Owner: req.Owner, Devices: b, Slots: req.Slots, TTL: req.TTL,
		Effects: slices.Contains(req.Capabilities, protocol.CapabilityEffect),
		Limits:  lb, DefaultLimit: req.DefaultProjectLimit, Limited: req.Limited()}, nil
}

// AgentLockKey is the 64-bit key of the lock that serialises grants to one
// agent (a PostgreSQL advisory lock).
func AgentLockKey(agentID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("edgeagent grants to agent "))
	h.Write([]byte(agentID))
	return int64(h.Sum64())
}

// ProjectLockKey is the 64-bit key of the lock that serialises grants
// across agents while project limits are set (a PostgreSQL advisory lock),
// so that each grant counts the in-progress jobs of a project after every
// grant before it.
var ProjectLockKey = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("edgeagent grants under project limits"))
	return int64(h.Sum64())
}()

// CheckAgentID validates an agent id.
func CheckAgentID(id string) error { return protocol.ValidateAgentID(id) }

// MergeSettings returns cur with set applied and unset removed.
func MergeSettings(cur, set map[string]string, unset []string) map[string]string {
	out := map[string]string{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range unset {
		delete(out, k)
	}
	return out
}

// EncodeDevices encodes a device list for storage; nil is stored as [].
func EncodeDevices(ds []protocol.Device) []byte {
	if ds == nil {
		ds = []protocol.Device{}
	}
	b, _ := json.Marshal(ds)
	return b
}

// EncodeStrings encodes a string list for storage; nil is stored as [].
func EncodeStrings(ss []string) []byte {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss)
	return b
}

// CheckResult validates a result document: empty (stored as NULL) or JSON.
func CheckResult(result json.RawMessage) error {
	if len(result) > 0 && !json.Valid(result) {
		return fmt.Errorf("result is not valid json")
	}
	return nil
}
