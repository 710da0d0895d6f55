package coordinator

import (
	"context"
	"encoding/json"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
)

// commitResult accepts a result and returns its manifest: in one round trip
// when the store is a ManifestCommitter and results are not published
// through the outbox, else by commit and then Artifacts.
func (s *Server) commitResult(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error) {
	if mc, ok := s.store.(jobstore.ManifestCommitter); ok && !s.fx.publish {
		return mc.CommitManifest(ctx, tok, result)
	}
	if err := s.commit(ctx, tok, result); err != nil {
		return nil, err
	}
	arts, err := s.store.Artifacts(ctx, tok.JobID, tok.Generation)
	if err != nil {
		s.jobLog(tok).Error().Err(err).Msg("list manifest")
	}
	manifest := make([]string, 0, len(arts))
	for _, a := range arts {
		manifest = append(manifest, a.Key)
	}
	return manifest, nil
}
