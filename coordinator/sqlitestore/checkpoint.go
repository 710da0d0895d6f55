package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// Checkpoints run on a connection of their own, never in a write.
//
// In WAL mode SQLite copies the log back into the database file
// (a checkpoint) once the log has grown past 1,000 pages, and it does so in
// the commit that crossed the mark, on the writing connection. With
// synchronous=NORMAL that is the only moment a commit waits for the disk: the
// checkpoint syncs the log and then the database file, two fsyncs that take
// milliseconds to tens of milliseconds on an ordinary disk. Every write of
// this store goes through one connection, so the one commit that runs the
// checkpoint (a grant, say, on the stop path from a reassignment to its
// revoke) and every write queued behind it wait for both syncs
// (docs/design.md, "The stop path"; docs/benchmarks.md).
//
// So the writer never checkpoints (wal_autocheckpoint=0) and a checkpointer
// of its own does it beside the writes, on its own connection, in PASSIVE
// mode, which takes no lock a writer needs: every checkpointEvery, and
// sooner after checkpointAfter commits. What a commit leaves to the disk is
// unchanged (synchronous=NORMAL: a commit is in the operating system's hands
// at once and on the disk at the next checkpoint, now at most a second
// later); a crash of the process loses nothing committed.
var (
	checkpointEvery = time.Second
	checkpointAfter = 256 // commits
)

// checkpointer runs PASSIVE checkpoints on its own connection.
type checkpointer struct {
	db       *sql.DB
	commits  chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   sync.Once
	closeErr error // close's result

	mu  sync.Mutex
	n   int   // commits since the last wake-up
	err error // the last checkpoint's error, for CheckpointErr
	ran int64 // checkpoints run
}

func startCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, commits: make(chan struct{}, 1), stop: make(chan struct{})}
	c.wg.Go(c.run)
	return c
}

// committed counts a commit of the writer and wakes the checkpointer after
// checkpointAfter of them. It never blocks.
func (c *checkpointer) committed() {
	c.mu.Lock()
	c.n++
	wake := c.n >= checkpointAfter
	if wake {
		c.n = 0
	}
	c.mu.Unlock()
	if wake {
		select {
		case c.commits <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.commits:
		}
		c.checkpoint()
	}
}

// checkpoint runs one PASSIVE checkpoint: it copies what no reader still
// needs and never waits for a lock.
func (c *checkpointer) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var busy, log, done int64
	err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
	c.mu.Lock()
	c.err = err
	if err == nil {
		c.ran++
	}
	c.mu.Unlock()
}

// stats returns the checkpoints run and the last one's error.
func (c *checkpointer) stats() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran, c.err
}

// close stops the checkpointer and closes its connection; SQLite
// checkpoints what is left when the last connection closes. Closing again
// returns the first close's result.
func (c *checkpointer) close() error {
	c.closed.Do(func() {
		close(c.stop)
		c.wg.Wait()
		c.closeErr = c.db.Close()
	})
	return c.closeErr
}
