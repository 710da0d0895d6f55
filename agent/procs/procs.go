package procs

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
)

// ErrKilled is returned by Start once the group has been killed: the job
// stopped and may start nothing more.
var ErrKilled = errors.New("process group killed")

// Group is the set of local processes one job started.
type Group struct {
	mu     sync.Mutex
	procs  map[*exec.Cmd]*handle
	killed bool
}

// NewGroup returns an empty group.
func NewGroup() *Group { return &Group{procs: map[*exec.Cmd]*handle{}} }

// Start starts cmd in its own process group (Unix) or job object (Windows)
// and registers it, unless the group has been killed. The caller must Wait
// for it.
func (g *Group) Start(cmd *exec.Cmd) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.killed {
		return fmt.Errorf("start %s: %w", cmd.Path, ErrKilled)
	}
	prepare(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	h, err := attach(cmd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	g.procs[cmd] = h
	return nil
}

// Wait waits for a process started with Start and forgets it.
func (g *Group) Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	g.mu.Lock()
	if h := g.procs[cmd]; h != nil {
		h.close()
		delete(g.procs, cmd)
	}
	g.mu.Unlock()
	return err
}

// Kill kills every registered process with everything it started, and makes
// later Start calls fail with ErrKilled. It is idempotent and returns how
// many processes it killed.
func (g *Group) Kill() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
	n := 0
	for cmd, h := range g.procs {
		h.kill(cmd)
		n++
	}
	return n
}

// Len returns how many started processes have not been waited for.
func (g *Group) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.procs)
}

type ctxKey struct{}

// WithGroup returns a context that carries g.
func WithGroup(ctx context.Context, g *Group) context.Context {
	return context.WithValue(ctx, ctxKey{}, g)
}

// FromContext returns the group ctx carries, or nil.
func FromContext(ctx context.Context) *Group {
	g, _ := ctx.Value(ctxKey{}).(*Group)
	return g
}

// Start starts cmd in the group ctx carries. Without a group, cmd still gets
// its own process group and is killed with it when ctx is done.
func Start(ctx context.Context, cmd *exec.Cmd) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	g := FromContext(ctx)
	if g == nil {
		g = NewGroup()
		if err := g.Start(cmd); err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { g.Kill() })
		return nil
	}
	return g.Start(cmd)
}

// Wait waits for cmd started with Start(ctx, cmd) and forgets it.
func Wait(ctx context.Context, cmd *exec.Cmd) error {
	if g := FromContext(ctx); g != nil {
		return g.Wait(cmd)
	}
	return cmd.Wait()
}
