package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

var (
	_ jobstore.ManifestCommitter = (*Store)(nil)
	_ jobstore.WorkCounter       = (*Store)(nil)
)

const manifestSQL = `SELECT key FROM artifacts WHERE job_id = $1 AND generation = $2 ORDER BY created_at, name`

// CommitManifest is Commit followed by the manifest. Results that arrive
// while another batch of them is with the database are grouped (see
// commitGroup): each is its own fenced commitSQL statement and its own
// manifest query, and a batch goes to the database in one round trip and
// one transaction.
func (s *Store) CommitManifest(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error) {
	if err := sqlstore.CheckResult(result); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	return s.commitGrouped(ctx, &groupedCommit{ctx: ctx, tok: tok, result: result, done: make(chan struct{})})
}

// commitGrouped sends r with the batch of its moment and answers its
// outcome: the manifest, or the refusal.
func (s *Store) commitGrouped(ctx context.Context, r *groupedCommit) ([]string, error) {
	tok := r.tok
	s.commits.add(r)
	select {
	case <-r.done:
	case <-ctx.Done():
		// The statement may still run; its outcome is then unknown to the
		// caller, as with any request cut short.
		return nil, fmt.Errorf("commit %s: %w", tok, ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, r.err)
	}
	if !r.ok {
		return nil, s.refused(ctx, "commit", tok)
	}
	if r.keys == nil {
		r.keys = []string{}
	}
	return r.keys, nil
}

// QueuedJobs counts the queued jobs that are due: their not_before, if
// any, passed on the database clock (partial index jobs_queued_oldest).
func (s *Store) QueuedJobs(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs j WHERE j.status = 'QUEUED' AND `+due), "count queued jobs")
}

// ExpiredLeases counts the in-progress jobs whose lease expired on the
// database clock (partial index jobs_in_progress_expiry: the clock is read
// once, in an InitPlan, so that it bounds the index scan).
func (s *Store) ExpiredLeases(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs
		WHERE status = 'IN_PROGRESS' AND lease_expires_at <= (SELECT clock_timestamp())`), "count expired leases")
}

// InProgressByOwner counts the in-progress jobs of every owner (partial
// index jobs_in_progress_owner).
func (s *Store) InProgressByOwner(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT worker_id, count(*) FROM jobs WHERE status = 'IN_PROGRESS' GROUP BY worker_id`)
	return sqlstore.Read(rows, err, sqlstore.OwnerCounts, "count jobs in progress")
}

// maxGroup bounds the results of one batch; groupTimeout bounds its
// round trip.
const (
	maxGroup     = 64
	groupTimeout = 30 * time.Second
)

// groupedCommit is one result waiting for its batch.
type groupedCommit struct {
	ctx    context.Context
	tok    fencing.Token
	result json.RawMessage
	// observed, when set, is the result's observations as
	// observedCommitSQL takes them (c their request): the result goes
	// with that statement instead of commitSQL.
	observed []byte
	c        jobstore.ObservedResult
	done     chan struct{}
	ok       bool // accepted
	keys     []string
	err      error
}

// commitGroup sends accepted-result writes to the database in batches: one
// batch at a time, holding every result that arrived while the previous
// one was with the database (group commit). Each result is still its own
// fenced statement (commitSQL, the token in its WHERE clause, its
// write_events row) followed by its own manifest query; the batch is one
// round trip and one implicit transaction, so the database commits once
// for all of them. Should the database refuse the batch (an error, not a
// stale token: the whole transaction is then rolled back), each result is
// sent again on its own.
type commitGroup struct {
	s       *Store
	mu      sync.Mutex
	queue   []*groupedCommit
	running bool
	wg      sync.WaitGroup
}

func (g *commitGroup) add(r *groupedCommit) {
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if g.running {
		g.mu.Unlock()
		return
	}
	g.running = true
	g.wg.Add(1)
	g.mu.Unlock()
	go g.drain()
}

// drain sends batches until the queue is empty.
func (g *commitGroup) drain() {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		batch := append([]*groupedCommit(nil), g.queue[:n]...)
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.send(batch)
	}
}

// send writes one batch and hands every result its outcome.
func (g *commitGroup) send(batch []*groupedCommit) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if len(live) > 1 {
		// The batch serves requests with contexts of their own; it runs
		// under none of them, bounded by its own timeout.
		ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
		err := g.exec(ctx, live)
		cancel()
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) {
			for _, r := range live {
				if err != nil {
					r.err = err
				}
				close(r.done)
			}
			return
		}
		// The database refused the transaction and rolled it all back:
		// nothing of the batch was written. Each goes again on its own.
	}
	for _, r := range live {
		r.ok, r.keys = false, nil
		r.err = g.exec(r.ctx, []*groupedCommit{r})
		close(r.done)
	}
}

// exec sends rs as one batch: commitSQL (observedCommitSQL for a result
// with observations) and the manifest query for each.
func (g *commitGroup) exec(ctx context.Context, rs []*groupedCommit) error {
	b := &pgx.Batch{}
	for _, r := range rs {
		if r.observed != nil {
			b.Queue(observedCommitSQL, observedArgs(r.tok, r.c, r.observed)...)
		} else {
			b.Queue(commitSQL, r.tok.JobID, r.tok.Generation, r.tok.Owner, nullJSON(r.result))
		}
		b.Queue(manifestSQL, r.tok.JobID, r.tok.Generation)
	}
	br := g.s.pool.SendBatch(ctx, b)
	var err error
	for _, r := range rs {
		if err = br.QueryRow().Scan(&r.ok); err != nil {
			break
		}
		var rows pgx.Rows
		if rows, err = br.Query(); err != nil {
			break
		}
		if r.keys, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// wait returns once no batch is being sent.
func (g *commitGroup) wait() { g.wg.Wait() }
