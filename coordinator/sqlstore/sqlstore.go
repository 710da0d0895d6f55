package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
)

// Verbs recorded in write_events. Every attempt of a fenced write or a grant
// is one row, accepted or not.
//
//   - claim, reassign: owner and generation of the grant (the new generation
//     when accepted, the job's current one when refused).
//   - reclaim: the token taken away (old owner, old generation).
//   - renew, artifact, result, fail: the token presented.
//   - result_unfenced: the lab-only UnfencedCommit; generation 0, since it
//     carries no token.
const (
	VerbClaim          = "claim"
	VerbReassign       = "reassign"
	VerbReclaim        = "reclaim"
	VerbRenew          = "renew"
	VerbArtifact       = "artifact"
	VerbResult         = "result"
	VerbFail           = "fail"
	VerbResultUnfenced = "result_unfenced"
)

// WriteCount is the number of accepted and rejected write attempts of one
// verb.
type WriteCount struct {
	Verb     string
	Accepted int64
	Rejected int64
}

// Lab is the surface of a SQL store beyond coordinator.Store that the lab
// (experiments, benchmarks, statistics) uses. The wire protocol cannot reach
// it: no coordinator endpoint calls these methods.
type Lab interface {
	coordinator.Store
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

// ValidateJobID accepts ids that are safe as an element of an object key
// (jobs/<job_id>/g<generation>/<name>) and of a log line: 1 to 200
// characters of [A-Za-z0-9._-], not "." or "..".
func ValidateJobID(id string) error {
	if id == "" || len(id) > 200 || id == "." || id == ".." {
		return fmt.Errorf("invalid job id %q", id)
	}
	for _, r := range id {
		ok := r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return fmt.Errorf("invalid job id %q: only [A-Za-z0-9._-]", id)
		}
	}
	return nil
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

// CheckResult validates a result document: empty (stored as NULL) or JSON.
func CheckResult(result json.RawMessage) error {
	if len(result) > 0 && !json.Valid(result) {
		return fmt.Errorf("result is not valid json")
	}
	return nil
}
