package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

// unfencedCommit is the planted bug: the result is written with the
// store's UnfencedCommit (UPDATE … WHERE id = $job), the write a lease
// without a fencing token amounts to, instead of the fenced UPDATE.
type unfencedCommit struct{ sqlstore.Lab }

func (s unfencedCommit) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	ok, err := s.UnfencedCommit(ctx, tok.JobID, tok.Owner, result)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("commit %s: %w", tok, coordinator.ErrNotFound)
	}
	return nil
}

// plantUnfencedCommit wraps a store handle with the planted bug.
func plantUnfencedCommit(t *testing.T) func(coordinator.Store) coordinator.Store {
	return func(s coordinator.Store) coordinator.Store {
		lab, ok := s.(sqlstore.Lab)
		if !ok {
			t.Errorf("store %T has no UnfencedCommit", s)
			return s
		}
		return unfencedCommit{lab}
	}
}
