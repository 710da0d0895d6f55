package fencing

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrStale is returned when a fenced write is refused because the token is no
// longer the job's current one. A caller that sees it must stop the job at
// once: no further upload, no result.
var ErrStale = errors.New("stale token")

// ErrRevoked is the cancellation cause of a job revoked by the coordinator.
var ErrRevoked = errors.New("job revoked")

// ErrLeaseExpired is the cancellation cause of a job whose self-fence deadline
// passed before a renewal was accepted.
var ErrLeaseExpired = errors.New("lease expired")

// Token identifies one grant of ownership of a job. Generation is raised by
// the coordinator's store on every grant (claim, reassignment, reclaim) and
// never on a renewal.
type Token struct {
	JobID      string `json:"job_id"`
	Owner      string `json:"owner"`
	Generation int64  `json:"generation"`
}

// Owner returns the owner string "<agent_id>/<boot_id>".
func Owner(agentID, bootID string) string { return agentID + "/" + bootID }

// SplitOwner splits an owner string into agent id and boot id.
func SplitOwner(owner string) (agentID, bootID string, err error) {
	a, b, ok := strings.Cut(owner, "/")
	if !ok || a == "" || b == "" || strings.Contains(b, "/") {
		return "", "", fmt.Errorf("parse owner %q: want <agent_id>/<boot_id>", owner)
	}
	return a, b, nil
}

// Validate reports whether every field of the token is set and well formed.
func (t Token) Validate() error {
	var problems []string
	if t.JobID == "" {
		problems = append(problems, "job_id is empty")
	}
	if _, _, err := SplitOwner(t.Owner); err != nil {
		problems = append(problems, err.Error())
	}
	if t.Generation < 1 {
		problems = append(problems, fmt.Sprintf("generation %d is not positive", t.Generation))
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid token: %s", strings.Join(problems, "; "))
	}
	return nil
}

// AgentID returns the agent id part of the owner, or "" when malformed.
func (t Token) AgentID() string {
	a, _, err := SplitOwner(t.Owner)
	if err != nil {
		return ""
	}
	return a
}

func (t Token) String() string {
	return fmt.Sprintf("%s@%s#g%d", t.JobID, t.Owner, t.Generation)
}

// S3 metadata keys (minio-go adds the x-amz-meta- prefix).
const (
	MetaJobID      = "job-id"
	MetaOwner      = "owner"
	MetaGeneration = "generation"
)

// Metadata returns the token as S3 user metadata: x-amz-meta-job-id,
// x-amz-meta-owner and x-amz-meta-generation once sent.
func (t Token) Metadata() map[string]string {
	return map[string]string{
		MetaJobID:      t.JobID,
		MetaOwner:      t.Owner,
		MetaGeneration: strconv.FormatInt(t.Generation, 10),
	}
}

// FromMetadata reads a token back from S3 user metadata. Keys are matched
// case-insensitively, with or without the x-amz-meta- prefix, because servers
// and clients canonicalise them differently; two keys that name the same
// stamp with different values are refused. On error the token is zero.
func FromMetadata(md map[string]string) (Token, error) {
	var vals [3]*string // job id, owner, generation
	for k, v := range md {
		k = strings.ToLower(strings.TrimPrefix(strings.ToLower(k), "x-amz-meta-"))
		i := slices.Index([]string{MetaJobID, MetaOwner, MetaGeneration}, k)
		if i < 0 {
			continue
		}
		if vals[i] != nil && *vals[i] != v {
			return Token{}, fmt.Errorf("parse token metadata: conflicting values for %s", k)
		}
		vals[i] = &v
	}
	get := func(i int) string {
		if vals[i] == nil {
			return ""
		}
		return *vals[i]
	}
	gen := get(2)
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil {
		return Token{}, fmt.Errorf("parse generation metadata %q: %w", gen, err)
	}
	t := Token{JobID: get(0), Owner: get(1), Generation: g}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// ObjectKey returns the storage key of an artifact of this token:
// jobs/<job_id>/g<generation>/<name>.
func (t Token) ObjectKey(name string) string {
	return fmt.Sprintf("jobs/%s/g%d/%s", t.JobID, t.Generation, name)
}
