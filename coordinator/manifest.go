package coordinator

import (
	"context"
	"encoding/json"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// commitResult accepts a result and returns its manifest: in one round trip
// when the store is a ManifestCommitter and results are not published
// through the outbox, else by commit and then Artifacts. A result with
// observations is accepted by the store's CommitObserved, which writes
// them in the same transaction (with the outbox message when results are
// published); a store that does not keep observations refuses it (503)
// rather than drop them.
func (s *Server) commitResult(ctx context.Context, tok fencing.Token, result json.RawMessage, obs []protocol.Observation) ([]string, error) {
	if len(obs) > 0 {
		obsStore, ok := s.store.(jobstore.ObservationStore)
		if !ok {
			return nil, unavailable("this coordinator's store does not keep observations")
		}
		c := jobstore.ObservedResult{Result: result, Observations: obs}
		if s.fx.publish {
			c.OutboxKey = jobstore.OutboxKey(tok.JobID)
		}
		manifest, err := obsStore.CommitObserved(ctx, tok, c)
		if err == nil && s.fx.publish && s.fx.dispatcher != nil {
			s.fx.dispatcher.Kick()
		}
		return manifest, err
	}
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
