package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// DefaultURLExpiry is how long an artifact's presigned GET URL stays valid
// when the caller gives no expiry (the coordinator uses
// storage.presign_expiry, whose default is the same).
const DefaultURLExpiry = 15 * time.Minute

// ArtifactStore reads jobs and their artifacts: a jobstore.Store.
type ArtifactStore interface {
	Get(ctx context.Context, jobID string) (jobstore.Job, error)
	Artifacts(ctx context.Context, jobID string, generation int64) ([]jobstore.ArtifactRecord, error)
}

// Artifact is one artifact of a job as a researcher sees it: its stamps
// and a presigned GET URL, never storage credentials.
type Artifact struct {
	Name        string    `json:"name"`
	Key         string    `json:"key"` // the object key in the bucket
	Generation  int64     `json:"generation"`
	Owner       string    `json:"owner"` // <agent_id>/<boot_id> of the token that registered it
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type"`
	CreatedAt   time.Time `json:"created_at"`
	// Superseded: registered under an older generation than the one that
	// ended the job (only listed with generations=all).
	Superseded   bool      `json:"superseded"`
	URL          string    `json:"url"`
	URLExpiresAt time.Time `json:"url_expires_at"`
}

// ArtifactList is the answer of GET /api/v1/jobs/{id}/artifacts.
type ArtifactList struct {
	JobID      string     `json:"job_id"`
	Status     string     `json:"status"`
	Generation int64      `json:"generation"` // the generation whose artifacts are current
	Artifacts  []Artifact `json:"artifacts"`
}

// ErrNoStorage: no presigner, so no URL can be made.
var ErrNoStorage = errors.New("artifact storage is not configured (storage in the coordinator config)")

// Artifacts lists job's artifacts with a URL for each, valid for expiry
// (DefaultURLExpiry when zero): those registered under the job's current
// generation (the one that ended it, for a finished job), and with all,
// those of every older generation too, marked superseded, oldest
// generation first.
func Artifacts(ctx context.Context, st ArtifactStore, p coordinator.Presigner, expiry time.Duration, j jobstore.Job, all bool) (ArtifactList, error) {
	if p == nil {
		return ArtifactList{}, ErrNoStorage
	}
	if expiry <= 0 {
		expiry = DefaultURLExpiry
	}
	out := ArtifactList{JobID: j.ID, Status: j.Status, Generation: j.Generation, Artifacts: []Artifact{}}
	first := j.Generation
	if all {
		first = 1
	}
	for g := first; g <= j.Generation; g++ {
		if g < 1 {
			continue
		}
		recs, err := st.Artifacts(ctx, j.ID, g)
		if err != nil {
			return ArtifactList{}, err
		}
		for _, r := range recs {
			expires := time.Now().Add(expiry).UTC().Truncate(time.Second)
			u, err := p.PresignGet(ctx, r.Key, expiry)
			if err != nil {
				return ArtifactList{}, fmt.Errorf("list artifacts of job %s: %w", j.ID, err)
			}
			out.Artifacts = append(out.Artifacts, Artifact{
				Name: r.Name, Key: r.Key, Generation: r.Generation, Owner: r.Owner, Size: r.Size,
				SHA256: r.SHA256, ContentType: r.ContentType, CreatedAt: r.CreatedAt,
				Superseded: r.Generation != j.Generation, URL: u, URLExpiresAt: expires,
			})
		}
	}
	return out, nil
}
