package coordinator

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// refusedRevoked is the reason of a request refused because its agent was
// revoked (edgecoord agent revoke, docs/operations.md "Retire a PC").
const refusedRevoked = "revoked"

// revokedEvery is how often the coordinator reads the revoked agents.
const revokedEvery = time.Second

// revokedAgents is the set of revoked agents as last read from the store;
// nil until read, and always empty with a store that keeps none.
type revokedAgents struct {
	set atomic.Pointer[map[string]bool]
}

func (r *revokedAgents) has(agentID string) bool {
	m := r.set.Load()
	return m != nil && (*m)[agentID]
}

// refreshRevoked reads the revoked agents from the store. A revoke made by
// `edgecoord agent revoke` in another process reaches every coordinator
// within revokedEvery; the NATS server has cut the agent off already.
func (s *Server) refreshRevoked(ctx context.Context) {
	es, ok := s.store.(jobstore.EnrollStore)
	if !ok {
		return
	}
	agents, err := es.RevokedAgents(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("read revoked agents")
		}
		return
	}
	m := make(map[string]bool, len(agents))
	for id := range agents {
		m[id] = true
	}
	s.revoked.set.Store(&m)
}

// refuseRevoked answers a request of a revoked agent 403 and counts it.
func (s *Server) refuseRevoked(agentID, reply string) bool {
	if !s.revoked.has(agentID) {
		return false
	}
	s.metrics.refusedRequest(s.known.label(agentID), refusedRevoked)
	s.replyError(reply, protocol.CodeForbidden, "agent revoked")
	return true
}
