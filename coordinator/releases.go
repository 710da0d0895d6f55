package coordinator

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// ReleaseBucket stores the agent binaries of releases in the
// coordinator's bucket (docs/releases.md).
type ReleaseBucket interface {
	// PutRelease streams size bytes of r into the bucket; once their
	// SHA-256 is known to be sha256 it calls record (which records the
	// release in the store) and leaves them at key when record returns
	// true. A body of another size or digest is refused, record is not
	// called, and nothing is kept at key.
	PutRelease(ctx context.Context, key string, r io.Reader, size int64, sha256 string, record func() (bool, error)) error
}

var _ ReleaseBucket = (*S3Presigner)(nil)

// releaseIncoming is where a release binary streams to before its digest
// is checked.
const releaseIncoming = "releases/incoming/"

// ErrReleaseDigest: a release binary's bytes are not those its digest
// names.
var ErrReleaseDigest = fmt.Errorf("the binary's SHA-256 is not the one declared")

// PutRelease streams the binary to a key of its own under
// releases/incoming/, hashing it; when its digest is the one declared and
// record says so, it copies it inside the bucket to key. The release is
// recorded before it is copied: of two different binaries sent for one
// key at once, the one the store refuses is never copied there, and an
// add that failed after the record is repaired by adding the same binary
// again.
func (p *S3Presigner) PutRelease(ctx context.Context, key string, r io.Reader, size int64, sha256 string, record func() (bool, error)) error {
	if size <= 0 || size > protocol.MaxReleaseSize {
		return fmt.Errorf("put release: size %d is not in 1…%d", size, protocol.MaxReleaseSize)
	}
	tmp, sum, err := p.putIncoming(ctx, releaseIncoming, ".bin", "application/octet-stream", r, size)
	defer p.removeIncoming(ctx, tmp)
	if err != nil {
		return fmt.Errorf("put release: %w", err)
	}
	if sum != sha256 {
		return fmt.Errorf("put release: %w (%s declared, %s received)", ErrReleaseDigest, sha256, sum)
	}
	if ok, err := record(); err != nil || !ok {
		return err
	}
	if _, err := p.c.CopyObject(ctx, minio.CopyDestOptions{Bucket: p.bucket, Object: key},
		minio.CopySrcOptions{Bucket: p.bucket, Object: tmp}); err != nil {
		return fmt.Errorf("put release: copy to %s: %w", key, err)
	}
	return nil
}

// ReleaseBucket is where the server stores release binaries: its
// presigner's bucket, nil when the presigner cannot write them.
func (s *Server) ReleaseBucket() ReleaseBucket {
	b, _ := s.opts.Presigner.(ReleaseBucket)
	return b
}

// noteUpdate records the update state an agent reported in a hello or
// heartbeat (docs/releases.md); a state that is none is logged and
// dropped, never failing the hello or heartbeat it came with.
func (s *Server) noteUpdate(ctx context.Context, agentID string, st *protocol.UpdateStatus) {
	rs, ok := s.store.(jobstore.ReleaseStore)
	if st == nil || !ok {
		return
	}
	if !s.updates.changed(agentID, *st) {
		return
	}
	if err := rs.SetAgentUpdate(ctx, agentID, *st); err != nil {
		s.updates.forget(agentID)
		s.log.Warn().Err(err).Str("agent_id", agentID).Msg("update state not recorded")
	}
}

// lastUpdates is the update state each agent last reported to this
// coordinator: a heartbeat that repeats it within updateRewrite writes
// nothing. It is written again after that, since with several
// coordinators another may have recorded a later state meanwhile.
type lastUpdates struct {
	mu   sync.Mutex
	last map[string]reportedUpdate
}

type reportedUpdate struct {
	st protocol.UpdateStatus
	at time.Time
}

// updateRewrite is how often an unchanged update state is written again.
const updateRewrite = 30 * time.Second

// changed records st as the agent's and reports whether it is to be
// written: it differs from the one before, or that one is older than
// updateRewrite.
func (l *lastUpdates) changed(agentID string, st protocol.UpdateStatus) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if prev, ok := l.last[agentID]; ok && prev.st == st && now.Sub(prev.at) < updateRewrite {
		return false
	}
	if l.last == nil {
		l.last = map[string]reportedUpdate{}
	}
	l.last[agentID] = reportedUpdate{st, now}
	return true
}

func (l *lastUpdates) forget(agentID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, agentID)
}
