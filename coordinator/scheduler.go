package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// reapLimit bounds the leases one sweep returns to the queue.
const reapLimit = 100

// schedulable returns the agents that may get a job now, from the store:
// online (heard from within OfflineAfter on the database clock), not
// draining, with at least one usable phone. The order is random so no agent
// is favoured.
//
// Unless fresh, the list read from the store is reused for agentsMaxAge
// (scheduler passes come on every kick: a heartbeat with a free slot, a
// result), its SeenAgo moved on by the time since it was read. A pass thus
// sees a hello, a heartbeat or a drain that came in since at most that
// late; the grant statement checks the agent's session, drain flags and
// load itself. The reaper, which reads the list only when a lease has
// expired, asks for a fresh one.
func (s *Server) schedulable(ctx context.Context, fresh bool) ([]jobstore.Agent, error) {
	all, age, err := s.agentList(ctx, fresh)
	if err != nil {
		return nil, err
	}
	var out []jobstore.Agent
	s.mu.Lock()
	for _, a := range all {
		a.SeenAgo += age
		if a.Online(s.opts.OfflineAfter) && !a.Draining && !a.AgentDraining && !s.full[a.ID] && len(protocol.ReadyDevices(a.Devices)) > 0 {
			out = append(out, a)
		}
	}
	s.mu.Unlock()
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

// agentsMaxAge is how long the scheduler and the reaper reuse the agent
// list they read from the store: at most a quarter of the schedule
// interval, at most 100ms.
func (s *Server) agentsMaxAge() time.Duration {
	return min(s.opts.ScheduleInterval/4, 100*time.Millisecond)
}

// agentList returns every agent as read from the store at most
// agentsMaxAge ago (now when fresh), and how long ago.
func (s *Server) agentList(ctx context.Context, fresh bool) ([]jobstore.Agent, time.Duration, error) {
	s.agentsMu.Lock()
	defer s.agentsMu.Unlock()
	if age := time.Since(s.agentsAt); !fresh && s.agents != nil && age < s.agentsMaxAge() {
		return s.agents, age, nil
	}
	all, err := s.store.Agents(ctx)
	if err != nil {
		return nil, 0, err
	}
	s.agents, s.agentsAt = all, time.Now()
	s.noteDuplicates(DuplicateSerials(all, s.opts.OfflineAfter))
	ids := make([]string, len(all))
	for i, a := range all {
		ids[i] = a.ID
	}
	s.known.set(ids)
	return all, 0, nil
}

// noteAgent puts the agent as a hello or heartbeat just stored it into the
// agent list the scheduler reuses, so that the next pass grants nothing on
// a phone the agent has just reported not ready (nor misses one it reported
// ready), however recently the list was read.
func (s *Server) noteAgent(a jobstore.Agent) {
	s.agentsMu.Lock()
	defer s.agentsMu.Unlock()
	if s.agents == nil {
		return
	}
	age := time.Since(s.agentsAt)
	for i := range s.agents {
		if s.agents[i].ID == a.ID {
			// The list's entries age with the list (schedulable adds its
			// age): this one was seen just now. The list is copied: the
			// callers of agentList read the one they got without the lock.
			a.SeenAgo -= age
			all := slices.Clone(s.agents)
			all[i] = a
			s.agents = all
			return
		}
	}
	s.agents = nil // a new agent: read the list again
}

// noteDuplicates keeps the serials several online agents report, logging
// each once when it appears and once when it is gone. The caller holds
// agentsMu.
func (s *Server) noteDuplicates(dups map[string][]string) {
	for serial, agents := range dups {
		if !slices.Equal(s.dups[serial], agents) {
			s.log.Warn().Str("serial", serial).Strs("agents", agents).
				Msg("phone refused to every project: " + DuplicateReason(serial, agents))
		}
	}
	for serial := range s.dups {
		if _, still := dups[serial]; !still {
			s.log.Info().Str("serial", serial).Msg("phone serial reported by one agent again: it takes work again")
		}
	}
	s.dups = dups
}

// claimRequest is the claim for agent a: its phones less those whose serial
// another online agent reports too, each with the projects the phone rule
// lets it serve.
func (s *Server) claimRequest(a jobstore.Agent) jobstore.ClaimRequest {
	s.agentsMu.Lock()
	dups := s.dups
	s.agentsMu.Unlock()
	devs := a.Devices
	if len(dups) > 0 {
		devs = slices.DeleteFunc(slices.Clone(devs), func(d protocol.Device) bool { return len(dups[d.Serial]) > 1 })
	}
	req := jobstore.ClaimRequest{Owner: a.Owner(), Devices: devs, Slots: max(1, a.Slots), TTL: s.opts.LeaseTTL, Capabilities: a.Capabilities,
		ProjectLimits: s.opts.ProjectLimits, DefaultProjectLimit: s.opts.DefaultProjectLimit}
	if rule := s.opts.Phones; rule.Restricts() {
		req.DeviceProjects = make(map[string]jobstore.DeviceProjects, len(devs))
		for _, d := range devs {
			req.DeviceProjects[d.Serial] = rule.Projects(a.ID, d)
		}
	}
	return req
}

// scheduleOnce grants queued jobs to the agents that can take them: for
// each agent, the first due queued job (highest priority first, oldest
// first within one priority, projects at their limit skipped) matching one
// of its free phones, until
// its slots or its matching phones run out. Each grant is one statement in
// the store; the assign is sent after it. A pass ends once it has granted
// as many jobs as were queued when it began; jobs queued since wait for the
// next pass (a kick or the schedule interval).
//
// With a store that is a WorkCounter the pass starts from its indexes:
// the queued jobs are counted without reading the others, and agents whose
// slots are all taken are skipped without a grant attempt (the grant
// statement checks the load again in any case).
func (s *Server) scheduleOnce(ctx context.Context) {
	wc, fast := s.store.(jobstore.WorkCounter)
	var queued int64
	if fast {
		n, err := wc.QueuedJobs(ctx)
		if err != nil {
			s.log.Error().Err(err).Msg("count queued jobs")
			return
		}
		queued = n
	} else {
		counts, err := s.store.JobCounts(ctx)
		if err != nil {
			s.log.Error().Err(err).Msg("count jobs")
			return
		}
		queued = counts[jobstore.StatusQueued]
	}
	if queued == 0 {
		return
	}
	agents, err := s.schedulable(ctx, false)
	if err != nil {
		s.log.Error().Err(err).Msg("list agents")
		return
	}
	var load map[string]int
	if fast {
		if load, err = wc.InProgressByOwner(ctx); err != nil {
			s.log.Error().Err(err).Msg("count jobs in progress")
			return
		}
	}
	for _, a := range agents {
		if queued <= 0 {
			return
		}
		if load != nil && load[a.Owner()] >= max(1, a.Slots) {
			continue
		}
		for queued > 0 {
			lease, err := s.store.ClaimFor(ctx, s.claimRequest(a))
			if errors.Is(err, jobstore.ErrNoJob) {
				break
			}
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error().Err(err).Str("agent_id", a.ID).Msg("claim job")
				}
				return
			}
			queued--
			s.metrics.granted.WithLabelValues("claim").Inc()
			s.assignAsync(ctx, a.ID, lease)
		}
	}
}

// reapOnce is one sweep of the reaper. Jobs whose deadline passed end
// TIMED_OUT first (expireOnce). Expired leases (database clock) are
// first handed straight to another agent with a free matching phone, one
// statement per job (generation + 1, the old token recorded as reclaimed);
// the rest go back to the queue (generation + 1, no owner). Each old owner
// is sent a revoke.
//
// With a store that is a WorkCounter a sweep first counts the expired
// leases from the expiry index and ends there when there are none, and it
// skips agents whose slots are all taken.
func (s *Server) reapOnce(ctx context.Context) {
	s.expireOnce(ctx)
	var load map[string]int
	if wc, ok := s.store.(jobstore.WorkCounter); ok {
		n, err := wc.ExpiredLeases(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error().Err(err).Msg("count expired leases")
			}
			return
		}
		if n == 0 {
			return
		}
		if load, err = wc.InProgressByOwner(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Error().Err(err).Msg("count jobs in progress")
			}
			return
		}
	}
	agents, err := s.schedulable(ctx, true)
	if err != nil {
		s.log.Error().Err(err).Msg("list agents")
		return
	}
	for _, a := range agents {
		if load != nil && load[a.Owner()] >= max(1, a.Slots) {
			continue
		}
		for {
			lease, old, err := s.store.TakeOverExpired(ctx, s.claimRequest(a))
			if errors.Is(err, jobstore.ErrNoJob) {
				break
			}
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error().Err(err).Str("agent_id", a.ID).Msg("take over expired lease")
				}
				return
			}
			s.metrics.reclaimed.WithLabelValues("lease_expired").Inc()
			s.metrics.attemptEnded(protocol.FailClassInfrastructure, protocol.CauseLeaseExpired)
			s.metrics.granted.WithLabelValues("takeover").Inc()
			s.jobLog(old).Info().Int64("new_generation", lease.Token.Generation).Str("new_owner", lease.Token.Owner).
				Msg("lease expired; job reassigned")
			s.Revoke(old, "lease expired")
			s.assignAsync(ctx, a.ID, lease)
		}
	}
	toks, err := s.store.ReclaimExpired(ctx, reapLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Msg("reclaim expired leases")
		}
		return
	}
	for _, t := range toks {
		s.metrics.reclaimed.WithLabelValues("lease_expired").Inc()
		s.attemptTaken(ctx, t, protocol.CauseLeaseExpired)
		s.jobLog(t).Info().Msg("lease expired; attempt ended")
		s.Revoke(t, "lease expired")
	}
	if len(toks) > 0 {
		s.Kick()
	}
}

func (s *Server) assignAsync(ctx context.Context, agentID string, lease jobstore.Lease) {
	s.bg.Go(func() { _ = s.sendAssign(ctx, agentID, lease) })
}

// sendAssign offers a granted lease to its agent. When the agent does not
// take it (error reply or no reply), the job is released at once with a
// fenced fail rather than left to expire (docs/protocol.md, assign):
//
//   - 503, the agent or the granted phone is not ready (no free slot,
//     draining, shutting down, the phone offline or gone): the job never
//     ran. It goes back to the queue at once, the grant costing it no
//     attempt and no backoff, and the agent gets no assign until it reports
//     a free slot again (unless it did while the assign was out).
//   - 400, the agent cannot run the task: a job-class failure, the job
//     ends FAILED at once (retrying it would be refused the same way).
//   - anything else (no reply, 403, 409): an infrastructure failure,
//     retried while the job has attempts left.
func (s *Server) sendAssign(ctx context.Context, agentID string, lease jobstore.Lease) error {
	log := s.jobLog(lease.Token)
	msg := protocol.Assign{Token: lease.Token, LeaseTTLMS: s.opts.LeaseTTL.Milliseconds(), Task: lease.Task, Serial: lease.Device,
		DeadlineMS: DeadlineMS(lease, s.opts.LeaseTTL)}
	rctx, cancel := context.WithTimeout(ctx, s.opts.AssignTimeout)
	defer cancel()
	freed := s.freeReports(agentID)
	// The APKs of install_app steps travel as presigned GETs: the agent
	// needs no storage credentials to fetch them.
	apks, err := s.apkDownloads(rctx, lease.Task, msg.DeadlineMS)
	msg.APKs = apks
	if err == nil {
		err = natsrpc.Request(rctx, s.nc, protocol.AgentSubject(agentID, protocol.VerbAssign), msg, &protocol.Ack{})
	} else if errors.Is(err, errNoAPKDownload) {
		// Not sent: no agent could run the job (a 400 from the agent).
		err = fmt.Errorf("%w: %w", protocol.ErrBadRequest, err)
	}
	if err != nil {
		log.Warn().Err(err).Str("agent_id", agentID).Str("device", lease.Device).Msg("assign not accepted; releasing")
		s.metrics.assignFailures.Inc()
		// Release even when the assign ended because the coordinator is
		// stopping: the job is not left to wait for its lease to expire.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.AssignTimeout)
		defer cancel()
		f := jobstore.Failure{Reason: "assign not accepted: " + err.Error(), Class: protocol.FailClassInfrastructure, Cause: jobstore.CauseAssignRefused}
		switch {
		case errors.Is(err, protocol.ErrUnavailable):
			// The agent is fuller than the store knows, or the phone went
			// away: leave the agent alone until it reports free slots
			// again, and give the job back without counting the grant.
			s.markFull(agentID, freed)
			f.NotRun = true
		case errors.Is(err, protocol.ErrBadRequest):
			f.Class = protocol.FailClassJob
		}
		if ferr := s.store.Fail(ctx, lease.Token, f); ferr != nil && !errors.Is(ferr, fencing.ErrStale) {
			log.Error().Err(ferr).Msg("release job")
		} else if ferr == nil {
			switch {
			case f.NotRun:
				s.metrics.assignsRequeued.Inc()
			case f.Class == protocol.FailClassJob:
				s.metrics.attemptEnded(protocol.FailClassJob, f.Cause)
				s.metrics.jobEnded(jobstore.StatusFailed)
				log.Warn().Str("agent_id", agentID).Msg("job failed: the agent cannot run its task")
			default:
				s.attemptTaken(ctx, lease.Token, f.Cause)
			}
		}
		s.Kick()
		return fmt.Errorf("assign job %s to %s: %w", lease.Token.JobID, agentID, err)
	}
	log.Info().Str("agent_id", agentID).Str("device", lease.Device).Msg("job assigned")
	return nil
}

// Revoke pushes a revoke for tok to its agent. Delivery is best effort: the
// token is already stale in the store, so the agent learns it at its next
// fenced call or its self-fence deadline at the latest.
func (s *Server) Revoke(tok fencing.Token, reason string) {
	if err := PublishRevoke(s.nc, tok, reason, s.opts.AssignTimeout); err != nil {
		s.jobLog(tok).Warn().Err(err).Msg("push revoke")
		return
	}
	s.metrics.revokes.Inc()
}

// PublishRevoke publishes a revoke of tok to its agent (no reply expected)
// and flushes the connection in place, waiting at most flushTimeout for
// the server's answer. Without the flush the revoke would leave when the
// connection's flusher goroutine next runs, which on a reassignment is
// after the assign to the new owner has been encoded: the stop path is
// shorter by about half a millisecond at the median and more in the tail
// (docs/benchmarks.md, stop latency). While the connection is down the
// revoke waits in its reconnect buffer and nothing is flushed.
func PublishRevoke(nc *nats.Conn, tok fencing.Token, reason string, flushTimeout time.Duration) error {
	data, err := json.Marshal(protocol.Revoke{Token: tok, Reason: reason})
	if err != nil {
		return fmt.Errorf("encode revoke: %w", err)
	}
	if err := nc.Publish(protocol.AgentSubject(tok.AgentID(), protocol.VerbRevoke), data); err != nil {
		return fmt.Errorf("publish revoke of %s: %w", tok, err)
	}
	if !nc.IsConnected() {
		return nil
	}
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		return fmt.Errorf("flush revoke of %s: %w", tok, err)
	}
	return nil
}

// PushControl sends a control command to an agent and returns its reply
// body.
func PushControl(ctx context.Context, nc *nats.Conn, agentID string, c protocol.Control) (json.RawMessage, error) {
	var reply json.RawMessage
	if err := natsrpc.Request(ctx, nc, protocol.AgentSubject(agentID, protocol.VerbControl), c, &reply); err != nil {
		return nil, fmt.Errorf("push %s to agent %s: %w", c.Command, agentID, err)
	}
	return reply, nil
}

// pushAsync sends a control command without waiting for the caller.
func (s *Server) pushAsync(agentID string, c protocol.Control) {
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.AssignTimeout)
		defer cancel()
		if _, err := PushControl(ctx, s.nc, agentID, c); err != nil {
			s.log.Warn().Err(err).Str("agent_id", agentID).Str("command", c.Command).Msg("push control")
		}
	})
}

// Reassign moves a job to another online agent: the store raises the
// generation in one statement, the old owner is sent a revoke (when
// revokeOld) and the new one an assign. It returns the granted lease once
// the store has granted it, whether or not the agent took the assign.
func (s *Server) Reassign(ctx context.Context, jobID, agentID string, revokeOld bool) (jobstore.Lease, error) {
	a, err := s.store.GetAgent(ctx, agentID)
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("reassign job %s: %w", jobID, err)
	}
	if !a.Online(s.opts.OfflineAfter) {
		return jobstore.Lease{}, fmt.Errorf("reassign job %s: agent %s is not connected", jobID, agentID)
	}
	before, err := s.store.Get(ctx, jobID)
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("reassign job %s: %w", jobID, err)
	}
	if rule := s.opts.Phones; rule.Restricts() && !slices.ContainsFunc(a.Devices, func(d protocol.Device) bool {
		return rule.Refusal(before.Project, a.ID, d, nil) == ""
	}) {
		return jobstore.Lease{}, fmt.Errorf("reassign job %s: agent %s has no phone project %s may use (projects.<name>.phones, docs/operations.md)", jobID, agentID, before.Project)
	}
	lease, err := s.store.Reassign(ctx, jobID, a.Owner(), s.opts.LeaseTTL)
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("reassign job %s: %w", jobID, err)
	}
	s.metrics.granted.WithLabelValues("reassign").Inc()
	// The previous holder is the one the reassignment took the job from:
	// its generation is the one just before the grant.
	if before.WorkerID != "" && before.Generation == lease.Token.Generation-1 {
		old := fencing.Token{JobID: jobID, Owner: before.WorkerID, Generation: before.Generation}
		if revokeOld {
			s.Revoke(old, "reassigned")
		}
	}
	// An agent that does not take the assign gets the job released again
	// (fenced requeue, see sendAssign); the grant happened all the same.
	_ = s.sendAssign(ctx, agentID, lease)
	return lease, nil
}

// setFull marks or clears an agent as having no free slot by its own word
// (a heartbeat), or clears it on an accepted result or failure report of
// one of its jobs (marks it on a job handed back because the agent is
// leaving). Clearing it counts a report of a free slot (freeReports).
func (s *Server) setFull(agentID string, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if full {
		s.full[agentID] = true
	} else {
		delete(s.full, agentID)
		s.freed[agentID]++
	}
}

// freeReports counts the agent's reports of a free slot (heartbeat or
// hello, an accepted result or failure report) so far.
func (s *Server) freeReports(agentID string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freed[agentID]
}

// markFull marks the agent as having no free slot, after it refused an
// assign or sent a heartbeat without one when it had made seen reports of
// a free slot: unless it reported one since, which a refusal or heartbeat
// sent before it must not override.
func (s *Server) markFull(agentID string, seen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed[agentID] == seen {
		s.full[agentID] = true
	}
}
